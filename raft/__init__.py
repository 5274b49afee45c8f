"""trioka raft package."""
