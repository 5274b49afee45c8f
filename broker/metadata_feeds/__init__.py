"""The adapters of broker.ports.MetadataFeed: where a broker's metadata comes from, one module
per source, chosen by deploy.node (the composition root). The broker core (broker.node) has no
metadata-mode branch: what differs between the modes is here.

| | `zk.ZkMetadataFeed` | `raft_log.RaftMetadataFeed` | `standalone.StandaloneMetadataFeed` |
|---|---|---|---|
| partition changes | the controller's LeaderAndIsr / StopReplica (broker.leader_and_isr) | the image's local changes, after the initial catch-up | the image's local changes |
| applied by | broker.partition_changes (fetchers) | broker.partition_changes (fetchers) | `PartitionManager.apply_leader_and_isr` (single node) |
| image | UpdateMetadata, topic configs from ZooKeeper | metadata records, snapshots | metadata records |
| handlers | LeaderAndIsr, StopReplica, UpdateMetadata; relays AlterPartition, ControlledShutdown, AllocateProducerIds | - | - |
| controller id | the last controller that sent a request | the lowest unfenced broker | this broker |
| controlled shutdown | the ControlledShutdown request | through the lifecycle heartbeat (deploy.node's hook) | - |
| forwarded admin requests wait for | their effect in the image | their effect in the image | the local log's commit offset |
"""
