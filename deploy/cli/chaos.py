"""`trioka chaos`: the chaos tools (the fault proxy, chaos runs)."""

from __future__ import annotations

import click

from deploy.cli.chaos_proxy import proxy
from deploy.cli.chaos_run import run


@click.group()
def chaos() -> None:
    """Chaos testing: fault proxy, chaos runs."""


chaos.add_command(proxy)
chaos.add_command(run)
