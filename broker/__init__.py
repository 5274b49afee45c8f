"""trioka broker package."""
