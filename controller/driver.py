"""Single-writer controller event loop (the trio driver around the pure controller)."""

import trio  # noqa: F401
