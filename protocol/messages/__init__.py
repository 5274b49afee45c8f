"""Every API's request and response messages; importing this registers them all."""

from protocol.messages.acls import *  # noqa: F403
from protocol.messages.alter_partition import *  # noqa: F403
from protocol.messages.api_versions import *  # noqa: F403
from protocol.messages.base import (
    INTER_BROKER_APIS,
    REQUESTS,
    ApiKey,
    Request,
    Response,
    error_response,
)
from protocol.messages.broker_lifecycle import *  # noqa: F403
from protocol.messages.configs import *  # noqa: F403
from protocol.messages.controlled_shutdown import *  # noqa: F403
from protocol.messages.create_partitions import *  # noqa: F403
from protocol.messages.describe_cluster import *  # noqa: F403
from protocol.messages.describe_quorum import *  # noqa: F403
from protocol.messages.elect_leaders import *  # noqa: F403
from protocol.messages.fetch import *  # noqa: F403
from protocol.messages.fetch_snapshot import *  # noqa: F403
from protocol.messages.find_coordinator import *  # noqa: F403
from protocol.messages.group_offsets import *  # noqa: F403
from protocol.messages.groups import *  # noqa: F403
from protocol.messages.init_producer_id import *  # noqa: F403
from protocol.messages.leader_and_isr import *  # noqa: F403
from protocol.messages.list_offsets import *  # noqa: F403
from protocol.messages.metadata import *  # noqa: F403
from protocol.messages.offset_for_leader_epoch import *  # noqa: F403
from protocol.messages.produce import *  # noqa: F403
from protocol.messages.producer_ids import *  # noqa: F403
from protocol.messages.quorum_epoch import *  # noqa: F403
from protocol.messages.reassignments import *  # noqa: F403
from protocol.messages.sasl import *  # noqa: F403
from protocol.messages.scram_credentials import *  # noqa: F403
from protocol.messages.stop_replica import *  # noqa: F403
from protocol.messages.topics import *  # noqa: F403
from protocol.messages.update_metadata import *  # noqa: F403
from protocol.messages.vote import *  # noqa: F403

__all__ = ["INTER_BROKER_APIS", "REQUESTS", "ApiKey", "Request", "Response", "error_response"]
