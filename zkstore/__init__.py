"""trioka zkstore package."""
