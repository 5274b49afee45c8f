"""deploy/docker."""
