"""ZkAclSync over an in-memory ZooKeeper: every ACL znode at start, then only the resources the
new change notifications of either store name (a broker's AclAuthorizer cache)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from deploy.node.zk_acl_sync import ZkAclSync
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from zkstore.znodes import (
    AclChangeNotificationZNode,
    AclResource,
    AclStoreZNode,
    acl_store_paths,
)

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ORDERS = AclResource(ResourceType.TOPIC, LIT, "orders")
TEAM = AclResource(ResourceType.GROUP, PRE, "team-")


class FakeZk:
    """The few ZkClient reads ZkAclSync makes, over a dict of znodes (children watches only)."""

    def __init__(self) -> None:
        self.znodes: dict[str, bytes] = dict.fromkeys(acl_store_paths(), b"")
        self.watches: list[Callable[[object], None]] = []
        self.reads: list[str] = []
        self._seq = 0

    def children(self, path: str) -> list[str]:
        return [p[len(path) + 1 :] for p in self.znodes if p.rpartition("/")[0] == path]

    async def get_children(self, path: str, *, watch: Callable[[object], None]) -> list[str]:
        self.watches.append(watch)
        return self.children(path)

    async def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        return [self.children(p) if p in self.znodes else None for p in paths]

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        self.reads += paths
        return [(self.znodes[p], None) if p in self.znodes else None for p in paths]

    def write(self, resource: AclResource, acls: Iterable[AclBinding]) -> None:
        """What the controller's multi-op does: the znode (deleted when empty), a notification."""
        acls = list(acls)
        if acls:
            self.znodes[AclStoreZNode.path(resource)] = AclStoreZNode.encode(acls)
        else:
            self.znodes.pop(AclStoreZNode.path(resource), None)
        create = AclChangeNotificationZNode.create_path(resource.pattern_type)
        self.znodes[f"{create}{self._seq:010d}"] = AclChangeNotificationZNode.encode(resource)
        self._seq += 1
        for watch in self.watches:
            watch(object())
        self.watches.clear()


def acl(resource: AclResource, principal: str = "User:alice") -> AclBinding:
    return AclBinding(
        resource.resource_type,
        resource.name,
        resource.pattern_type,
        principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


class Image:
    """What ZkMetadataFeed.set_resource_acls keeps: resource -> its ACLs."""

    def __init__(self) -> None:
        self.acls: dict[AclResource, set[AclBinding]] = {}
        self.calls = 0

    def set(
        self, kind: ResourceType, pattern: PatternType, name: str, acls: Iterable[AclBinding]
    ) -> None:
        self.calls += 1
        resource = AclResource(kind, pattern, name)
        self.acls[resource] = set(acls)
        if not self.acls[resource]:
            del self.acls[resource]


async def test_reads_every_acl_at_start_then_what_notifications_name() -> None:
    zk, image = FakeZk(), Image()
    zk.write(ORDERS, [acl(ORDERS)])
    zk.write(TEAM, [acl(TEAM)])
    sync = ZkAclSync(zk, image.set)  # type: ignore[arg-type]
    await sync.sync_once()
    assert image.acls == {ORDERS: {acl(ORDERS)}, TEAM: {acl(TEAM)}}

    # A change in each store: only those resources are read again, each once.
    zk.reads.clear()
    zk.write(ORDERS, [acl(ORDERS), acl(ORDERS, "User:bob")])
    zk.write(TEAM, [])
    await sync.sync_once()
    assert image.acls == {ORDERS: {acl(ORDERS), acl(ORDERS, "User:bob")}}
    assert sorted(p for p in zk.reads if not p.rpartition("/")[2].startswith("acl_changes_")) == [
        "/kafka-acl-extended/prefixed/Group/team-",
        "/kafka-acl/Topic/orders",
    ]

    # Nothing new: nothing read, nothing set.
    zk.reads.clear()
    calls = image.calls
    await sync.sync_once()
    assert zk.reads == [] and image.calls == calls


async def test_an_unreadable_znode_leaves_the_resource_as_it_was() -> None:
    zk, image = FakeZk(), Image()
    zk.write(ORDERS, [acl(ORDERS)])
    sync = ZkAclSync(zk, image.set)  # type: ignore[arg-type]
    await sync.sync_once()
    zk.write(ORDERS, [acl(ORDERS, "User:bob")])
    zk.znodes[AclStoreZNode.path(ORDERS)] = b'{"version":9,"acls":[]}'
    await sync.sync_once()
    assert image.acls == {ORDERS: {acl(ORDERS)}}
