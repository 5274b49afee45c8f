"""The controller's trio service: the single-writer event loop (driver), the channels to brokers,
and the one term lifecycle (term) over the Leadership port, with each metadata mode's term tasks."""
