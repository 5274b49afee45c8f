"""CreateAcls and DeleteAcls: the controller's side (Kafka's AclControlManager); the rules live
with the image (protocol.metadata.acls)."""

from __future__ import annotations

from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.messages.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.metadata.acls import create_acls as create
from protocol.metadata.acls import delete_acls as delete


def create_acls(
    state: ControllerState, request: CreateAclsRequest, ctx: ControllerContext
) -> ControllerResult[CreateAclsResponse]:
    records, response = create(state.image.acls, request, ctx.new_topic_id)
    return ControllerResult(records=records, response=response)


def delete_acls(
    state: ControllerState, request: DeleteAclsRequest, ctx: ControllerContext
) -> ControllerResult[DeleteAclsResponse]:
    records, response = delete(state.image.acls, request)
    return ControllerResult(records=records, response=response)
