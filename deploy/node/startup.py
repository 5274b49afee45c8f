"""What every node process's `main` shares: its two options, one-line errors for a bad config or
a failed start (port in use, bad log dir, ...), and exit codes (130 after Ctrl-C)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import trio

from protocol.config_defs import ConfigError


class StartupError(Exception):
    """The process could not start, for a reason its user can act on (the message says which)."""


def startup_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", help="TOML file with Kafka config names")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    return parser


@contextlib.contextmanager
def exit_on_user_error(config_exit_code: int) -> Iterator[None]:
    """A bad config exits with `config_exit_code`, a failed start with 1, one line each."""
    try:
        yield
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(config_exit_code)
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def run_process(
    fn: Callable[[Any], Awaitable[object]],
    config: Any,
    *,
    what: str,
    user_errors: tuple[type[BaseException], ...],
) -> None:
    """trio.run(fn, config); Ctrl-C exits 130; a user error inside trio's exception groups
    becomes StartupError("cannot start <what>: <cause>"), anything else propagates."""
    try:
        trio.run(fn, config)
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException as exc:
        cause = find_user_error(exc, user_errors)
        if cause is None:
            raise
        raise StartupError(f"cannot start {what}: {cause}") from None


def find_user_error(
    exc: BaseException, user_errors: tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first exception of `user_errors` in `exc` (trio hands errors from child tasks over
    as ExceptionGroups)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_user_error(inner, user_errors)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, user_errors) else None
