"""deploy/cluster."""
