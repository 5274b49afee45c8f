"""ACLs from ZooKeeper into a ZK-mode broker's metadata image (Kafka's AclAuthorizer cache:
loadCache at start, then its ZkNodeChangeNotificationListeners).

At start every ACL znode of both stores is read (/kafka-acl/<ResourceType>/<name> and
/kafka-acl-extended/prefixed/<ResourceType>/<name>); then, on every new notification under
/kafka-acl-changes or /kafka-acl-extended-changes (children watches), the resource pattern it
names is read again and replaces that pattern's ACLs in the image through `set_resource_acls`
(ZkMetadataFeed.set_resource_acls, which keys each ACL by protocol.metadata.acls.acl_id, as the
controller's loader does). The notification listing is taken before the reads, so a change
written meanwhile fires the watch and is read by the next round. An unreadable znode or
notification is logged and leaves the resource as it was, as Kafka's notification handler does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import structlog

from deploy.node.zk_watch_rounds import WatchRounds
from protocol.acls import AclBinding, PatternType, ResourceType
from zkstore import ZkClient
from zkstore.znodes import (
    ACL_PATTERN_TYPES,
    ACL_RESOURCE_TYPES,
    AclChangeNotificationZNode,
    AclResource,
    AclStoreZNode,
    ZNodeDecodeError,
)

log = structlog.get_logger("deploy.node.broker")

SetResourceAcls = Callable[[ResourceType, PatternType, str, Iterable[AclBinding]], None]
Numbered = dict[PatternType, list[tuple[int, str]]]
"""Per store: its change notifications as (sequence number, znode name), in order."""


class ZkAclSync(WatchRounds):
    """One broker's copy of the ACLs in ZooKeeper, kept by `run` (see the module's doc)."""

    WHAT = "acls"

    def __init__(
        self, zk: ZkClient, set_resource_acls: SetResourceAcls, *, retry_backoff_s: float = 1.0
    ) -> None:
        super().__init__(retry_backoff_s)
        self.zk = zk
        self.set_resource_acls = set_resource_acls
        self.acls: dict[AclResource, frozenset[AclBinding]] = {}
        self._last_change = dict.fromkeys(ACL_PATTERN_TYPES, -1)
        self._synced = False
        """Set once a whole round succeeded: later rounds read only what was notified."""

    def _apply(self, resource: AclResource, acls: frozenset[AclBinding]) -> None:
        if self.acls.get(resource, frozenset()) == acls:
            return
        if acls:
            self.acls[resource] = acls
        else:
            self.acls.pop(resource, None)
        self.set_resource_acls(resource.resource_type, resource.pattern_type, resource.name, acls)
        log.info(
            "acls from zookeeper",
            resource_type=resource.resource_type.name,
            pattern_type=resource.pattern_type.name,
            resource_name=resource.name,
            acls=len(acls),
        )

    async def _numbered(self) -> Numbered:
        prefix = AclChangeNotificationZNode.SEQUENCE_PREFIX
        numbered: Numbered = {}
        for pattern_type in ACL_PATTERN_TYPES:
            path = AclChangeNotificationZNode.path(pattern_type)
            children = await self.zk.get_children(path, watch=self._watch)
            numbered[pattern_type] = sorted(
                (int(c[len(prefix) :]), c)
                for c in children
                if c.startswith(prefix) and c[len(prefix) :].isdigit()
            )
        return numbered

    async def _notified(self, numbered: Numbered) -> set[AclResource]:
        """The resource patterns the notifications after the last round name."""
        paths = [
            f"{AclChangeNotificationZNode.path(pattern_type)}/{name}"
            for pattern_type, changes in numbered.items()
            for seq, name in changes
            if seq > self._last_change[pattern_type]
        ]
        named: set[AclResource] = set()
        for path, found in zip(paths, await self.zk.get_many(paths), strict=True):
            if found is None:
                continue  # deleted meanwhile
            try:
                named.add(AclChangeNotificationZNode.decode(path, found[0]))
            except ZNodeDecodeError as exc:
                log.error("unreadable acl change notification in zookeeper", error=str(exc))
        return named

    async def _listed(self) -> set[AclResource]:
        """Every resource pattern with an ACL znode, and those held that no longer have one."""
        kinds = [(p, t) for p in ACL_PATTERN_TYPES for t in ACL_RESOURCE_TYPES]
        children = await self.zk.get_children_many(
            [AclStoreZNode.type_path(p, t) for p, t in kinds]
        )
        listed = {
            AclResource(t, p, name)
            for (p, t), names in zip(kinds, children, strict=True)
            for name in names or ()
        }
        return listed | set(self.acls)

    async def _read(self, resources: Sequence[AclResource]) -> None:
        paths = [AclStoreZNode.path(r) for r in resources]
        for resource, found in zip(resources, await self.zk.get_many(paths), strict=True):
            try:
                acls = AclStoreZNode.decode(resource, found[0]) if found else ()
            except ZNodeDecodeError as exc:
                log.error("unreadable acls in zookeeper", error=str(exc))
                continue
            self._apply(resource, frozenset(acls))

    async def sync_once(self) -> None:
        """Read what changed since the last round and set the watches again."""
        numbered = await self._numbered()
        if self._synced:
            resources = await self._notified(numbered)
        else:
            # Listed after the notifications: whatever they name is read below.
            resources = await self._listed()
        await self._read(sorted(resources))
        for pattern_type, changes in numbered.items():
            if changes:
                last = max(self._last_change[pattern_type], changes[-1][0])
                self._last_change[pattern_type] = last
        self._synced = True


__all__ = ["SetResourceAcls", "ZkAclSync"]
