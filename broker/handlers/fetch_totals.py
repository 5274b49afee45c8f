"""TotalFetchRequestsPerSec of followers' incremental fetches, at a cost that does not grow with
the session.

Kafka counts every partition of a follower's session at every fetch (its incremental fetch reads
them all). trioka's reads only what may have changed (broker.handlers.fetch), and counting the
~8,300 partitions of a session at 25,000 one by one would cost more than the fetch itself. So
each session's partitions are counted per topic once (again when partitions join or leave), and
its fetches are added up and given to the counters at most every FLUSH_MS: one `inc` per topic
a second per session, whatever the fetch rate. A session the cache dropped has its last fetches
counted when the next session is counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from broker.metrics import BrokerTopicMetrics
from broker.replica.fetch_session import FetchSession, FetchSessionCache
from protocol.names import TopicPartition

FLUSH_MS = 1_000
"""How long a session's fetches may wait before they reach the counters."""


@dataclass(slots=True, eq=False)
class _Tally:
    session: FetchSession[TopicPartition]
    membership: int
    """The session's `membership` when `per_topic` was counted."""
    per_topic: dict[str, int]
    pending: int = 0
    """Fetches not yet in the counters."""
    due_ms: int = 0


class SessionFetchTotals:
    def __init__(
        self, metrics: BrokerTopicMetrics, sessions: FetchSessionCache[TopicPartition]
    ) -> None:
        self.metrics = metrics
        self.sessions = sessions
        self._tallies: dict[int, _Tally] = {}

    def fetched(self, session: FetchSession[TopicPartition], now_ms: int) -> None:
        """One incremental fetch of a follower's `session`: in the counters by now + FLUSH_MS."""
        tally = self._tallies.get(session.id)
        if tally is None or tally.session is not session or tally.membership != session.membership:
            tally = self._recount(session, tally)
        tally.pending += 1
        if now_ms >= tally.due_ms:
            self._flush(tally)
            tally.due_ms = now_ms + FLUSH_MS

    def _recount(self, session: FetchSession[TopicPartition], old: _Tally | None) -> _Tally:
        """Count `session`'s partitions per topic. What the old count of it had pending goes to
        the counters first, and so do the tallies of sessions the cache no longer holds (then
        dropped: new sessions and membership changes are rare, so this sweep is too)."""
        if old is not None:
            self._flush(old)
        for key, tally in list(self._tallies.items()):
            if self.sessions.get(key) is not tally.session:
                self._flush(tally)
                del self._tallies[key]
        per_topic = dict(Counter(tp.topic for tp in session.partitions))
        tally = self._tallies[session.id] = _Tally(session, session.membership, per_topic)
        return tally

    def _flush(self, tally: _Tally) -> None:
        if tally.pending:
            n = tally.pending
            self.metrics.fetched({topic: n * count for topic, count in tally.per_topic.items()})
            tally.pending = 0
