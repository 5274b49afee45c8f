"""deploy/node."""
