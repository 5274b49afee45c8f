"""trioka zkstore: the ZooKeeper backend (the only package that imports kazoo).

- `znodes`: Kafka's znode layout, one class per znode with its exact JSON.
- `client.ZkClient`: kazoo driven from trio (async requests, watches, connection states).
- `registration.BrokerRegistrar`: ephemeral /brokers/ids/<id>; broker epoch = czxid.
- `election.ControllerElection`: /controller + /controller_epoch compare-and-set.
- `fenced_writer.FencedWriter`: multi-ops checked against /controller_epoch, split under
  jute.maxbuffer, pipelined.
- `metadata_log.ZkMetadataLog`: controller.ports.MetadataLog on ZooKeeper (records -> znodes,
  `record_writes`); `loader.load_metadata`: znodes -> records for a new controller.
"""

from zkstore.client import ZkClient, ZkState, ZkStateEvent
from zkstore.election import BecameController, ControllerChanged, ControllerElection, Resigned
from zkstore.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    ZkMetadataWriteError,
    ZNodeTooLargeError,
)
from zkstore.loader import LoadedMetadata, load_metadata
from zkstore.metadata_log import ZkMetadataLog
from zkstore.registration import (
    BrokerRegistrar,
    ensure_persistent_paths,
    get_or_create_cluster_id,
)
from zkstore.znodes import BrokerInfo

__all__ = [
    "BecameController",
    "BrokerIdInUseError",
    "BrokerInfo",
    "BrokerRegistrar",
    "ControllerChanged",
    "ControllerElection",
    "ControllerMovedError",
    "LoadedMetadata",
    "Resigned",
    "ZNodeTooLargeError",
    "ZkClient",
    "ZkMetadataLog",
    "ZkMetadataWriteError",
    "ZkState",
    "ZkStateEvent",
    "ensure_persistent_paths",
    "get_or_create_cluster_id",
    "load_metadata",
]
