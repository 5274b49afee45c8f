"""`trioka chaos run`: a chaos run against a local cluster of its own, or with `--docker` the
compose cluster (deploy.chaos.run). Exit status: 0 the history is valid, 1 the checker found
anomalies, 2 a harness error."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click
import trio

from deploy.chaos.docker import DockerSettings
from deploy.chaos.run import RunConfig, run_chaos
from deploy.chaos.schedule import NEMESES
from deploy.cluster.supervisor import MODES
from deploy.node.config import ConfigError, parse_overrides
from deploy.telemetry.logs import configure_logging


def _settings(option: str, values: Sequence[str]) -> dict[str, str]:
    try:
        return parse_overrides(values)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@click.command()
@click.option("--mode", type=click.Choice(MODES), default="raft", show_default=True)
@click.option("--nemesis", "nemeses", default="kill,pause,controller", show_default=True,
              help=f"comma separated, from: {', '.join(NEMESES)}")  # fmt: skip
@click.option("--time-limit", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="seconds of workload under the nemesis (healing and final reads follow)")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True,
              help="the nemesis schedule and its target picks follow from it")  # fmt: skip
@click.option("--dir", "cluster_dir", type=click.Path(file_okay=False, path_type=Path),
              help="the cluster's directory (default: a new temporary one; with --docker only "
                   "the results go there)")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="where history.jsonl and verdict.json go (default: DIR/results)")  # fmt: skip
@click.option("--partitions", type=click.IntRange(min=1), default=6, show_default=True)
@click.option("--producers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--readers", type=click.IntRange(min=0), default=1, show_default=True,
              help="consumers by assignment (all partitions) during the run")  # fmt: skip
@click.option("--group-members", type=click.IntRange(min=0), default=2, show_default=True,
              help="consumers in the group during the run")  # fmt: skip
@click.option("--rate", type=click.FloatRange(min=1), default=150.0, show_default=True,
              help="sends per second, all producers together")  # fmt: skip
@click.option("--idempotence/--no-idempotence", default=True, show_default=True)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="a broker (and controller) setting, e.g. replica.lag.time.max.ms=3000")  # fmt: skip
@click.option("--topic-config", "topic_configs", multiple=True, metavar="KEY=VALUE",
              help="a config of the chaos topic (default min.insync.replicas=2)")  # fmt: skip
@click.option("--session-timeout-ms", type=click.IntRange(min=2000), default=3000,
              show_default=True,
              help="zookeeper.session.timeout.ms (zk) / broker.session.timeout.ms (raft)")  # fmt: skip
@click.option("--drop-produce-responses", type=click.FloatRange(0, 1), default=0.0,
              help="share of produce responses the brokers' proxies swallow all run long")  # fmt: skip
@click.option("--keep", is_flag=True, help="leave the cluster running at the end")
@click.option("--secure", is_flag=True,
              help="the local cluster with TLS and SCRAM everywhere (`trioka cluster up "
                   "--secure`); the workload logs in as its admin")  # fmt: skip
@click.option("--docker", is_flag=True,
              help="against the compose cluster (profile = --mode): one already up is used "
                   "and left up, else docker-compose brings it up and down")  # fmt: skip
@click.option("--compose-file", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("docker-compose.yml"), show_default=True, help="with --docker")  # fmt: skip
@click.option("--project-name", "project",
              help="with --docker: the compose project (default: as docker-compose names it)")  # fmt: skip
@click.option("--docker-host",
              help="with --docker: the daemon (default: DOCKER_HOST, else "
                   "unix:///run/trioka-docker/docker.sock)")  # fmt: skip
def run(mode: str, nemeses: str, time_limit: float, seed: int, cluster_dir: Path | None,
        out: Path | None, partitions: int, producers: int, readers: int, group_members: int,
        rate: float, idempotence: bool,
        overrides: tuple[str, ...], topic_configs: tuple[str, ...], session_timeout_ms: int,
        drop_produce_responses: float, keep: bool, secure: bool, docker: bool,
        compose_file: Path,
        project: str | None, docker_host: str | None) -> None:  # fmt: skip
    """Run producers (acks=all) and consumers against a new local cluster (or the compose
    cluster: --docker) while a seeded nemesis kills, pauses and cuts it; then heal, read
    everything back and check the history (lost writes, duplicates, ...). Prints the schedule
    and the verdict."""
    if docker and secure:
        raise click.BadParameter("--secure is for the local cluster", param_hint="--docker")
    if docker and overrides:
        raise click.BadParameter("the compose cluster's settings are docker-compose.yml's",
                                 param_hint="--override")  # fmt: skip
    config = RunConfig(
        mode=mode,
        nemeses=tuple(n for n in nemeses.split(",") if n.strip()),
        time_limit_s=time_limit,
        seed=seed,
        dir=cluster_dir,
        out=out,
        partitions=partitions,
        producers=producers,
        readers=readers,
        group_members=group_members,
        rate=rate,
        idempotence=idempotence,
        overrides=_settings("--override", overrides),
        topic_configs={"min.insync.replicas": "2", **_settings("--topic-config", topic_configs)},
        session_timeout_ms=session_timeout_ms,
        drop_produce_responses=drop_produce_responses,
        keep=keep,
        secure=secure,
        docker=DockerSettings(compose_file, project, docker_host) if docker else None,
    )
    # The runner's own events (nemesis operations, ...) say they come from it, not the CLI.
    configure_logging(role="chaos", level=os.environ.get("TRIOKA_LOG_LEVEL", "WARNING"))
    result = trio.run(run_chaos, config, lambda line: click.echo(line, err=True))
    if result.exit_code == 2:
        click.echo(f"error: {result.summary}", err=True)
    sys.exit(result.exit_code)
