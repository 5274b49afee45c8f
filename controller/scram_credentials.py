"""AlterUserScramCredentials: the controller's side (Kafka's ScramControlManager); the rules
live with the image (protocol.metadata.scram_credentials)."""

from __future__ import annotations

from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.metadata.scram_credentials import alter_scram_credentials


def alter_user_scram_credentials(
    state: ControllerState, request: AlterUserScramCredentialsRequest, ctx: ControllerContext
) -> ControllerResult[AlterUserScramCredentialsResponse]:
    records, response = alter_scram_credentials(state.image.scram, request)
    return ControllerResult(records=records, response=response)
