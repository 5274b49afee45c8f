"""`trioka user` (kafka-configs.sh --entity-type users, rpk security user): SCRAM credentials.

The password is salted in this process (client.admin_users); the brokers and controllers keep
only the salt and the keys derived from it. The CLI never writes ZooKeeper itself.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from client import Admin
from client.admin_users import upsertion
from deploy.cli.common import admin_props, fail, run, stdout_console
from deploy.cli.options import bootstrap_option, property_option
from protocol.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramMechanism,
)

_MECHANISM_NAMES = [m.mechanism_name for m in SCRAM_MECHANISMS]


def _mechanism_option(default: str | None) -> click.Option:
    return click.option(
        "--mechanism",
        "mechanisms",
        type=click.Choice(_MECHANISM_NAMES, case_sensitive=False),
        multiple=True,
        default=(default,) if default else (),
        show_default=bool(default),
        help="SCRAM mechanism (repeatable)"
        + ("." if default else "; default: every one the user has."),
    )


@click.group()
def user() -> None:
    """Create, list and delete SASL/SCRAM users."""


@user.command("create")
@click.argument("name")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="The user's password (prompted for when not given).",
)
@_mechanism_option("SCRAM-SHA-256")
@click.option(
    "--iterations",
    type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
    default=DEFAULT_ITERATIONS,
    show_default=True,
    help="PBKDF2 iterations the password is salted with.",
)
@bootstrap_option
@property_option
def user_create(name: str, password: str, mechanisms: tuple[str, ...], iterations: int,
                bootstrap_server: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Create user NAME, or change its password (one credential per --mechanism)."""
    if not password:
        fail("the password must not be empty")
    changes = [
        upsertion(name, password, ScramMechanism.from_name(m), iterations) for m in mechanisms
    ]

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            await admin.alter_user_scram_credentials(upsertions=changes)

    run(go)
    click.echo(f"Created user {name} ({', '.join(m.upper() for m in mechanisms)}).", err=True)


@user.command("delete")
@click.argument("name")
@_mechanism_option(None)
@bootstrap_option
@property_option
def user_delete(
    name: str, mechanisms: tuple[str, ...], bootstrap_server: str, properties: tuple[str, ...]
) -> None:
    """Delete user NAME's credentials."""

    async def go() -> list[ScramMechanism]:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            if mechanisms:
                chosen = [ScramMechanism.from_name(m) for m in mechanisms]
            else:
                (found,) = await admin.describe_user_scram_credentials([name])
                chosen = sorted(found.iterations)
            await admin.alter_user_scram_credentials(deletions=[(name, m) for m in chosen])
            return chosen

    deleted = run(go)
    click.echo(f"Deleted user {name} ({', '.join(m.mechanism_name for m in deleted)}).", err=True)


@user.command("list")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array on stdout, an object per credential: user, mechanism, "
              "iterations.")  # fmt: skip
@bootstrap_option
@property_option
def user_list(
    names: tuple[str, ...], as_json: bool, bootstrap_server: str, properties: tuple[str, ...]
) -> None:
    """Users with SCRAM credentials, their mechanisms and iteration counts."""

    async def go() -> list:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            return await admin.describe_user_scram_credentials(list(names) or None)

    users = run(go)
    rows = [(u.user, m.mechanism_name, n) for u in users for m, n in sorted(u.iterations.items())]
    if as_json:
        click.echo(json.dumps([{"user": u, "mechanism": m, "iterations": n} for u, m, n in rows]))
        return
    table = Table("USER", "MECHANISM", "ITERATIONS", box=None)
    for u, m, n in rows:
        table.add_row(u, m, str(n))
    stdout_console().print(table)
