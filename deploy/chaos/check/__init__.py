"""deploy/chaos/check."""
