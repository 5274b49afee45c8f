"""`trioka chaos`: the chaos tools (the fault proxy; the runner adds `run`)."""

from __future__ import annotations

import click

from deploy.cli_chaos_proxy import proxy


@click.group()
def chaos() -> None:
    """Chaos testing: fault proxy, chaos runs."""


chaos.add_command(proxy)
