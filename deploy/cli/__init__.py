"""deploy/cli."""
