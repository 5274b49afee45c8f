"""trioka protocol package."""
