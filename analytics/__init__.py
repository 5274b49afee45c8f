"""trioka analytics package."""
