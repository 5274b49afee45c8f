"""Profiles: where the client commands find a cluster when `-b` is not given (rpk's profiles).

    save_profile("local", "127.0.0.1:9092,...", cluster_dir, command_config=None)  # cluster up
    current_profile()          # the Profile in use, or None
    trioka profile list | use NAME | delete NAME | current

Kept in `$TRIOKA_CONFIG_DIR/profiles.json` (default `$XDG_CONFIG_HOME/trioka`, i.e.
`~/.config/trioka`): each profile names bootstrap servers, the cluster directory it came
from, and a client.properties file to log in with (`cluster up --secure`'s; secrets stay in
that 0600 file). `trioka cluster up` saves one (named by `--profile`, default `local`) and makes
it current. A client command without `-b` (and without TRIOKA_BOOTSTRAP_SERVER) uses the
current profile's servers and its client.properties (then `--command-config` and `-X` on top);
a profile whose cluster directory is gone is ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import click

PROFILES_FILE = "profiles.json"
DEFAULT_PROFILE = "local"


@dataclass(frozen=True)
class Profile:
    name: str
    bootstrap: str
    cluster_dir: str = ""
    command_config: str = ""
    """A client.properties file its clients read first ("" for none)."""


def config_dir() -> Path:
    explicit = os.environ.get("TRIOKA_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "trioka"


def _path() -> Path:
    return config_dir() / PROFILES_FILE


def _load() -> dict[str, object]:
    try:
        raw = json.loads(_path().read_text())
    except FileNotFoundError:
        return {"current": None, "profiles": {}}
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{_path()}: not a profiles file ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("profiles"), dict):
        raise click.ClickException(f"{_path()}: not a profiles file (no 'profiles' object)")
    return raw


def _store(raw: dict[str, object]) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw, indent=2) + "\n")
    tmp.replace(path)


def profiles() -> dict[str, Profile]:
    raw = _load()["profiles"]
    assert isinstance(raw, dict)
    out = {}
    for name, fields in raw.items():
        try:
            out[name] = Profile(**{**fields, "name": name})
        except TypeError as exc:
            raise click.ClickException(f"{_path()}: profile {name!r}: {exc}") from None
    return out


def save_profile(name: str, bootstrap: str, cluster_dir: Path, command_config: Path | None) -> None:
    """Add or replace profile `name` and make it current."""
    raw = _load()
    profile = Profile(name, bootstrap, str(cluster_dir), str(command_config or ""))
    fields = {k: v for k, v in asdict(profile).items() if k != "name"}
    raw["profiles"] = {**raw["profiles"], name: fields}  # type: ignore[dict-item]
    raw["current"] = name
    _store(raw)


def current_profile() -> Profile | None:
    """The current profile, unless its cluster directory is gone."""
    raw = _load()
    name = raw.get("current")
    if not isinstance(name, str):
        return None
    profile = profiles().get(name)
    if profile is None or (profile.cluster_dir and not Path(profile.cluster_dir).exists()):
        return None
    return profile


@click.group()
def profile() -> None:
    """Named clusters for commands run without -b (rpk's profiles); `cluster up` saves one."""


@profile.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array on stdout.")
def profile_list(as_json: bool) -> None:
    """Every profile; the current one marked *."""
    current = _load().get("current")
    rows = [{**asdict(p), "current": p.name == current} for p in profiles().values()]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        mark = "*" if row["current"] else " "
        click.echo(f"{mark} {row['name']}\t{row['bootstrap']}\t{row['cluster_dir']}")


@profile.command("use")
@click.argument("name")
def profile_use(name: str) -> None:
    """Make NAME the current profile."""
    raw = _load()
    if name not in profiles():
        raise click.ClickException(f"no profile {name!r} (trioka profile list)")
    raw["current"] = name
    _store(raw)


@profile.command("delete")
@click.argument("name")
def profile_delete(name: str) -> None:
    """Forget profile NAME (its cluster keeps running)."""
    raw = _load()
    if name not in profiles():
        raise click.ClickException(f"no profile {name!r} (trioka profile list)")
    del raw["profiles"][name]  # type: ignore[attr-defined]
    if raw.get("current") == name:
        raw["current"] = None
    _store(raw)


@profile.command("current")
def profile_current() -> None:
    """The current profile's name and bootstrap servers."""
    found = current_profile()
    if found is None:
        raise click.ClickException("no current profile (trioka cluster up saves one)")
    click.echo(f"{found.name}\t{found.bootstrap}")
