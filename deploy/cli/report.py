"""`trioka report`: the PySpark report job (analytics.job) on a running cluster's telemetry.

pyspark is the optional `analytics` extra: without it the command says how to install it
instead of failing on an import. Arguments are analytics.job's; `--cluster-dir DIR` takes the
bootstrap servers from a local cluster's DIR/cluster.json (`trioka cluster up --dir DIR`).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import click

from deploy.cluster.state import ClusterError, read_state

INSTALL_HINT = "pip install 'trioka[analytics]' (or `make setup-analytics` in a clone)"


def _bootstrap(bootstrap_server: str | None, cluster_dir: Path | None) -> str | None:
    if bootstrap_server:
        return bootstrap_server
    if cluster_dir is not None:
        try:
            return read_state(cluster_dir).bootstrap
        except ClusterError as exc:
            raise click.ClickException(str(exc)) from None
    return os.environ.get("TRIOKA_BOOTSTRAP_SERVER")


@click.command()
@click.option(
    "--bootstrap-server",
    "-b",
    metavar="HOST:PORT[,...]",
    help="the cluster whose telemetry topics are read (env TRIOKA_BOOTSTRAP_SERVER)",
)
@click.option(
    "--cluster-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="take the bootstrap servers from DIR/cluster.json (trioka cluster up)",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="report.html, *.png and tables/ (Parquet and CSV) go here",
)
@click.option("--from", "start", metavar="T", help="ISO 8601 (UTC when no zone) or epoch ms")
@click.option("--to", "end", metavar="T", help="ISO 8601 (UTC when no zone) or epoch ms")
@click.option(
    "--spool",
    "spools",
    multiple=True,
    metavar="DIR",
    type=click.Path(path_type=Path),
    help="a local telemetry spool directory to read too (repeatable)",
)
@click.option("--master", default=None, help="Spark master (default local[2])")
def report(
    bootstrap_server: str | None,
    cluster_dir: Path | None,
    out: Path,
    start: str | None,
    end: str | None,
    spools: tuple[Path, ...],
    master: str | None,
) -> None:
    """Write an HTML report (PNG charts, Parquet and CSV tables) from the cluster's telemetry
    topics (__trioka_metrics, __trioka_logs, __trioka_chaos_history) and spools."""
    if importlib.util.find_spec("pyspark") is None:
        raise click.ClickException(f"trioka report needs pyspark: {INSTALL_HINT}")
    argv = ["--out", str(out)]
    bootstrap = _bootstrap(bootstrap_server, cluster_dir)
    if bootstrap:
        argv += ["--bootstrap-server", bootstrap]
    for flag, value in (("--from", start), ("--to", end), ("--master", master)):
        if value is not None:
            argv += [flag, value]
    for spool in spools:
        argv += ["--spool", str(spool)]
    from analytics.job import main  # late: pyspark loads only for this command

    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's usage errors (status 2), already printed
        status = exc.code if isinstance(exc.code, int) else 2
    if status:
        raise SystemExit(status)
