"""trioka controller package."""
