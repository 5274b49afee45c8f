"""`trioka chaos proxy`: a fault proxy in front of one broker, for people (runs until Ctrl-C,
prints its counters as JSON on stdout at exit)."""

from __future__ import annotations

import json
import random
import signal

import click
import trio

from deploy.cluster.proxy import FaultProxy
from deploy.cluster.proxy_policy import Delay, ProxyPolicy
from protocol.messages import ApiKey


def _address(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def _api_keys(ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[int]:
    keys = set()
    for name in filter(None, (value or "").split(",")):
        try:
            keys.add(int(ApiKey[name.strip().upper().replace("-", "_")]))
        except KeyError:
            raise click.BadParameter(f"unknown api {name!r} (e.g. produce, fetch)") from None
    return frozenset(keys)


@click.command()
@click.option("--listen", required=True, callback=_address, help="HOST:PORT to accept on")
@click.option("--target", required=True, callback=_address, help="HOST:PORT of the broker")
@click.option("--delay-ms", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--jitter-ms", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--drop-responses", callback=_api_keys, help="api names, comma separated")
@click.option("--drop-probability", type=click.FloatRange(0, 1), default=1.0, show_default=True)
@click.option("--after-drop", type=click.Choice(["close", "hold"]), default="close",
              show_default=True)  # fmt: skip
@click.option("--seed", type=int, default=None, help="seed of the drop and jitter draws")
def proxy(
    listen: tuple[str, int],
    target: tuple[str, int],
    delay_ms: float,
    jitter_ms: float,
    drop_responses: frozenset[int],
    drop_probability: float,
    after_drop: str,
    seed: int | None,
) -> None:
    """Relay LISTEN to TARGET frame by frame, delaying both directions and dropping responses."""
    delay = Delay(delay_ms, jitter_ms)
    policy = ProxyPolicy(
        requests=delay,
        responses=Delay(delay_ms, jitter_ms),
        drop_responses=drop_responses,
        drop_probability=drop_probability if drop_responses else 0.0,
        after_drop=after_drop,  # type: ignore[arg-type]
    )
    fault_proxy = FaultProxy(listen, target, rng=random.Random(seed), policy=policy)

    async def main() -> None:
        # Ctrl-C and SIGTERM end the run through a signal receiver rather than trio's
        # KeyboardInterrupt, which could leave the loop idle in epoll with the signal lost.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                host, port = await nursery.start(fault_proxy.serve)
                click.echo(f"proxy {host}:{port} -> {target[0]}:{target[1]}", err=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    try:
        trio.run(main)
    finally:
        click.echo(json.dumps(fault_proxy.counters.as_dict()))
