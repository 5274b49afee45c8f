"""`trioka acl` (kafka-acls.sh, rpk acl): add, list and remove ACLs.

Options as kafka-acls.sh's: principals with `--allow-principal`/`--deny-principal` (User:alice),
hosts with `--allow-host`/`--deny-host` (default `*`), `--operation` (Read, Write, ...),
resources with `--topic`, `--group`, `--transactional-id` and `--cluster`, and
`--resource-pattern-type` (literal or prefixed; list and remove also take any and match).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from rich.table import Table

from client import Admin
from deploy.cli.common import admin_props, fail, run, stdout_console
from deploy.cli.options import bootstrap_option, property_option
from protocol.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

_OPERATIONS = [o.name.title().replace("_", "") for o in AclOperation if o.value > 1]
"""Kafka's names: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, ..."""


def _operation(name: str) -> AclOperation:
    for op in AclOperation:
        if op.name.replace("_", "").lower() == name.replace("_", "").lower():
            return op
    raise click.BadParameter(f"unknown operation {name!r}; one of {', '.join(_OPERATIONS)}")


def _resource_options(fn: Any) -> Any:
    for option in reversed([
        click.option("--topic", "topics", multiple=True, help="Topic (repeatable; * for all)."),
        click.option("--group", "groups", multiple=True, help="Consumer group (repeatable)."),
        click.option("--transactional-id", "transactional_ids", multiple=True,
                     help="Transactional id (repeatable)."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
    ]):  # fmt: skip
        fn = option(fn)
    return fn


def _resources(
    topics: Sequence[str], groups: Sequence[str], transactional_ids: Sequence[str], cluster: bool
) -> list[tuple[ResourceType, str]]:
    return [
        *((ResourceType.TOPIC, t) for t in topics),
        *((ResourceType.GROUP, g) for g in groups),
        *((ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids),
        *([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else []),
    ]


@click.group()
def acl() -> None:
    """Add, list and remove ACLs (the authorizer reads them)."""


@acl.command("add")
@click.option(
    "--allow-principal",
    "allow",
    multiple=True,
    metavar="TYPE:NAME",
    help="Principal allowed (repeatable), e.g. User:alice or User:*.",
)
@click.option(
    "--deny-principal",
    "deny",
    multiple=True,
    metavar="TYPE:NAME",
    help="Principal denied (repeatable).",
)
@click.option(
    "--allow-host", default=WILDCARD, show_default=True, help="Host of --allow-principal."
)
@click.option("--deny-host", default=WILDCARD, show_default=True, help="Host of --deny-principal.")
@click.option(
    "--operation",
    "operations",
    multiple=True,
    required=True,
    help=f"Operation (repeatable): {', '.join(_OPERATIONS)}.",
)
@_resource_options
@click.option(
    "--resource-pattern-type",
    type=click.Choice(["literal", "prefixed"]),
    default="literal",
    show_default=True,
    help="How resource names match.",
)
@bootstrap_option
@property_option
def acl_add(allow: tuple[str, ...], deny: tuple[str, ...], allow_host: str, deny_host: str,
            operations: tuple[str, ...], topics: tuple[str, ...], groups: tuple[str, ...],
            transactional_ids: tuple[str, ...], cluster: bool, resource_pattern_type: str,
            bootstrap_server: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Add ACLs: each principal, operation and resource given."""
    resources = _resources(topics, groups, transactional_ids, cluster)
    if not resources:
        fail("name a resource: --topic, --group, --transactional-id or --cluster")
    if not allow and not deny:
        fail("name a principal: --allow-principal or --deny-principal")
    pattern = PatternType[resource_pattern_type.upper()]
    who = [(p, allow_host, AclPermissionType.ALLOW) for p in allow]
    who += [(p, deny_host, AclPermissionType.DENY) for p in deny]
    bindings = [
        AclBinding(kind, name, pattern, principal, host, _operation(op), permission)
        for kind, name in resources
        for principal, host, permission in who
        for op in operations
    ]

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            await admin.create_acls(bindings)

    run(go)
    click.echo(f"Added {len(bindings)} ACL(s).", err=True)


def _filters(
    resources: list[tuple[ResourceType, str]], pattern: str, principal: str | None
) -> list[AclBindingFilter]:
    pattern_type = PatternType[pattern.upper()]
    if not resources:
        return [AclBindingFilter(pattern_type=pattern_type, principal=principal)]
    return [
        AclBindingFilter(kind, name, pattern_type, principal=principal) for kind, name in resources
    ]


_FILTER_PATTERN = click.option(
    "--resource-pattern-type", type=click.Choice(["any", "match", "literal", "prefixed"]),
    default="any", show_default=True,
    help="any: every pattern of the name given; match: the ACLs that apply to it.",
)  # fmt: skip


@acl.command("list")
@_resource_options
@_FILTER_PATTERN
@click.option("--principal", default=None, help="Only this principal's ACLs.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array on stdout, an object per ACL: principal, host, operation, "
              "permission, resource_type, resource_name, pattern_type.")  # fmt: skip
@bootstrap_option
@property_option
def acl_list(topics: tuple[str, ...], groups: tuple[str, ...], transactional_ids: tuple[str, ...],
             cluster: bool, resource_pattern_type: str, principal: str | None, as_json: bool,
             bootstrap_server: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """List ACLs (all of them without a resource or principal)."""
    filters = _filters(
        _resources(topics, groups, transactional_ids, cluster), resource_pattern_type, principal
    )

    async def go() -> list[AclBinding]:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            found: list[AclBinding] = []
            for f in filters:
                found += [a for a in await admin.describe_acls(f) if a not in found]
            return found

    _print(run(go), as_json)


@acl.command("remove")
@_resource_options
@click.option(
    "--resource-pattern-type", type=click.Choice(["any", "match", "literal", "prefixed"]),
    default="literal", show_default=True,
    help="As kafka-acls.sh: literal unless told (any: every pattern of the name given).",
)  # fmt: skip
@click.option("--principal", default=None, help="Only this principal's ACLs.")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@bootstrap_option
@property_option
def acl_remove(topics: tuple[str, ...], groups: tuple[str, ...],
               transactional_ids: tuple[str, ...], cluster: bool, resource_pattern_type: str,
               principal: str | None, force: bool, bootstrap_server: str,
               properties: tuple[str, ...]) -> None:  # fmt: skip
    """Remove the ACLs matching the resources and principal given."""
    resources = _resources(topics, groups, transactional_ids, cluster)
    if not resources and principal is None:
        fail("name a resource or --principal (to remove every ACL, --principal of each)")
    if not force:
        click.confirm("Remove the matching ACLs?", abort=True, err=True)
    filters = _filters(resources, resource_pattern_type, principal)

    async def go() -> list[AclBinding]:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            return await admin.delete_acls(filters)

    deleted = run(go)
    click.echo(f"Removed {len(deleted)} ACL(s).", err=True)


def _print(acls: list[AclBinding], as_json: bool) -> None:
    rows = [
        (a.principal, a.host, a.operation.name, a.permission.name, a.resource_type.name,
         a.resource_name, a.pattern_type.name)
        for a in acls
    ]  # fmt: skip
    if as_json:
        keys = ("principal", "host", "operation", "permission", "resource_type",
                "resource_name", "pattern_type")  # fmt: skip
        click.echo(json.dumps([dict(zip(keys, row, strict=True)) for row in rows]))
        return
    table = Table("PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE",
                  "RESOURCE-NAME", "PATTERN", box=None)  # fmt: skip
    for row in sorted(rows):
        table.add_row(*row)
    stdout_console().print(table)
