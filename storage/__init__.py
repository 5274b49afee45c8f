"""trioka storage package."""
