"""Shared test support: the broker process harness and a raw-wire client (see their modules)."""
