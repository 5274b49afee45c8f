"""Pure Raft core: no trio, no clock, no I/O (issue 4)."""
