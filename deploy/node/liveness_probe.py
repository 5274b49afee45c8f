"""The fast fencing's listener probe (controller.ports.ListenerProbe): a fresh TCP connect to a
broker's registered listener, then ApiVersions, whose answer names the node id and broker epoch
of the process that owns the listener. Each failure is classified (controller.liveness.Probe);
only ECONNREFUSED counts towards a fence, everything unexpected leaves the broker alone."""

from __future__ import annotations

import errno

import trio

from controller.liveness import Probe, ProbeResult
from protocol.codec import decode_response_body, decode_response_header, encode_request
from protocol.errors import ProtocolError
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}
_PROBE_CORRELATION_ID = 1
_MAX_ANSWER_BYTES = 1 << 20


class TcpListenerProbe:
    def __init__(self, *, timeout_s: float = 1.0, client_id: str = "trioka-controller-probe"):
        self.timeout_s = timeout_s
        """For the connect, and again for the answer: a longer silence is NOT proven dead."""
        self.client_id = client_id

    async def probe(self, host: str, port: int) -> ProbeResult:
        try:
            with trio.move_on_after(self.timeout_s) as connecting:
                stream = await trio.open_tcp_stream(host, port)
            if connecting.cancelled_caught:
                return ProbeResult(Probe.TIMEOUT, detail=f"no connection in {self.timeout_s:g} s")
        except ConnectionRefusedError:
            return ProbeResult(Probe.REFUSED)
        except OSError as exc:
            errnos = _errnos(exc)
            if errnos == {errno.ECONNREFUSED}:
                return ProbeResult(Probe.REFUSED)
            if errnos & {errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE}:
                # Accepted, then reset at once: a dying listener, or a middlebox.
                return ProbeResult(Probe.RESET, detail=f"while connecting: {exc}")
            outcome = Probe.UNREACHABLE if errnos and errnos <= _UNREACHABLE else Probe.ERROR
            return ProbeResult(outcome, detail=str(exc))
        async with stream:
            return await self._ask(stream)

    async def _ask(self, stream: trio.SocketStream) -> ProbeResult:
        frame = encode_request(_PROBE_CORRELATION_ID, self.client_id, ApiVersionsRequest())
        decoder = FrameDecoder(_MAX_ANSWER_BYTES)
        with trio.move_on_after(self.timeout_s):
            try:
                await stream.send_all(frame)
                while True:
                    payload = decoder.next_frame()
                    if payload is not NEED_DATA:
                        break
                    data = await stream.receive_some(65536)
                    if not data:
                        return ProbeResult(Probe.RESET, detail="closed without answering")
                    decoder.feed(data)
                correlation_id, body = decode_response_header(bytes(payload))
                answer = decode_response_body(ApiVersionsResponse, body)
            except (OSError, trio.BrokenResourceError) as exc:
                return ProbeResult(Probe.RESET, detail=str(exc) or type(exc).__name__)
            except ProtocolError as exc:
                return ProbeResult(Probe.NO_ANSWER, detail=str(exc))
            if correlation_id != _PROBE_CORRELATION_ID:
                return ProbeResult(Probe.NO_ANSWER, detail="answered another request")
            return ProbeResult(
                Probe.ANSWERED, node_id=answer.node_id, broker_epoch=answer.broker_epoch
            )
        return ProbeResult(Probe.NO_ANSWER, detail=f"no answer in {self.timeout_s:g} s")


def _errnos(exc: OSError) -> set[int | None]:
    """The errno of each connect attempt: trio.open_tcp_stream tries every address and raises
    an OSError caused by an ExceptionGroup of each attempt's error."""
    causes = exc.__cause__
    if isinstance(causes, BaseExceptionGroup):
        return {e.errno if isinstance(e, OSError) else None for e in causes.exceptions}
    return {exc.errno}
