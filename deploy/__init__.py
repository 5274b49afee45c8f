"""trioka deploy package."""
