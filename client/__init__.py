"""trioka client package."""
