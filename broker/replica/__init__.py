"""Per-partition replica state (leader/follower, HW, ISR): pure, no trio."""
