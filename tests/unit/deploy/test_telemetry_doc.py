"""docs/telemetry.md lists every catalogued log event and field (protocol.telemetry.LOG_EVENTS),
as deploy.telemetry.doc generates it: change the catalogue, regenerate the doc."""

from __future__ import annotations

from deploy.telemetry.doc import BEGIN, DOC, END, main, with_section
from protocol.telemetry import CONTEXT_FIELDS, LOG_EVENTS


def test_the_doc_is_generated_from_the_current_catalogue() -> None:
    text = DOC.read_text()
    assert text == with_section(text), "run: python -m deploy.telemetry.doc"
    assert main(["--check"]) == 0


def test_the_doc_names_every_event_field_and_value() -> None:
    section = DOC.read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    for spec in LOG_EVENTS:
        body = section.split(f'### "{spec.name}"', 1)[1].split("### ", 1)[0]
        for name, type_ in spec.fields.items():
            assert f"| `{name}` | {type_.value} |" in body, (spec.name, name)
        for values in spec.values.values():
            assert all(f"`{v}`" in body for v in values), spec.name
    for name in CONTEXT_FIELDS:
        assert f"| `{name}` |" in section


def test_rewriting_keeps_what_people_wrote() -> None:
    mine = (
        "# Telemetry\n\nIntro by hand.\n\n"
        + BEGIN
        + "\nstale\n"
        + END
        + "\n\n## Metrics\n\nBy hand.\n"
    )
    out = with_section(mine)
    assert out.startswith("# Telemetry\n\nIntro by hand.\n\n" + BEGIN)
    assert out.endswith(END + "\n\n## Metrics\n\nBy hand.\n") and "stale" not in out
    assert with_section(out) == out
    assert BEGIN in with_section("") and BEGIN in with_section("# Other\n")
