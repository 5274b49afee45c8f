"""Topic ids in Kafka's Uuid form: 16 random bytes as URL-safe base64 without padding.

Ids are random (never derived from the name) so a deleted and recreated topic gets a new id, and
anything still holding the old id can tell the difference (KIP-516).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's Uuid.ZERO_UUID: 'no topic id'."""
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
"""Kafka's Uuid.METADATA_TOPIC_ID (Uuid(0, 1)), reserved for __cluster_metadata."""
_RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})


def uuid_to_string(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError(f"a Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_string(text: str) -> bytes:
    """The 16 bytes of a Uuid string; raises ValueError naming the problem."""
    if len(text) != 22:
        raise ValueError(f"{text!r} is not a Uuid: expected 22 base64 characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text!r} is not a Uuid: {exc}") from None
    if len(raw) != 16 or uuid_to_string(raw) != text:
        raise ValueError(f"{text!r} is not a Uuid in canonical form")
    return raw


def is_uuid(text: str) -> bool:
    try:
        uuid_from_string(text)
    except ValueError:
        return False
    return True


def random_uuid(randbytes: Callable[[int], bytes] = os.urandom) -> str:
    """A new random Uuid string, as Kafka's Uuid.randomUuid.

    Reserved ids are skipped, and so are ids starting with '-' so that one can be passed on a
    command line without being taken for an option.
    """
    while True:
        text = uuid_to_string(randbytes(16))
        if text not in _RESERVED and not text.startswith("-"):
            return text
