"""deploy.telemetry.json_text: orjson's compact text, and the stdlib's where orjson refuses."""

from __future__ import annotations

import json
from pathlib import Path

from deploy.telemetry.json_text import dumps


def test_compact_text_that_the_stdlib_reads_back() -> None:
    event = {"event": "isr shrink", "old_isr": [1, 2, 3], "new_isr": [1, 2], "x": None, "f": 1.5}
    text = dumps(event)
    assert json.loads(text) == event
    assert ": " not in text and ", " not in text


def test_what_orjson_refuses_still_renders() -> None:
    assert json.loads(dumps({"big": 2**70})) == {"big": 2**70}
    assert json.loads(dumps({1: "non-str key"})) == {"1": "non-str key"}


def test_values_json_has_no_type_for_go_through_default() -> None:
    assert json.loads(dumps({"path": Path("/x")})) == {"path": repr(Path("/x"))}
    assert json.loads(dumps({"path": Path("/x")}, default=str)) == {"path": "/x"}
