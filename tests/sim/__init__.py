"""Deterministic simulation of the Raft core (issue 4).

One `random.Random(seed)` drives everything: the network (drop, duplicate, delay, reorder,
partitions), the faults (crash, restart) and the client proposals. Events run in time order
from one heap (`events.EventQueue`); after every event the checkers (`checkers.Checkers`) look
at every node that changed. A violation raises `SafetyViolation` with the seed, the event index
and a one-line rerun command (`.venv/bin/python -m tests.sim --seed S --events N`).
"""
