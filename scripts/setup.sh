#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine and a clean clone: system packages (only when
# missing), the virtual environment, and the project with the requested extras.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
venv=.venv

apt_packages=()
need_apt() { dpkg -s "$1" >/dev/null 2>&1 || apt_packages+=("$1"); }
# python3 -m venv needs Debian's python3-venv unless python3 is not Debian's own.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_apt python3-venv; fi
for pkg in ${TRIOKA_APT_PACKAGES:-}; do need_apt "$pkg"; done
if ((${#apt_packages[@]})); then
  echo "setup: installing Debian packages: ${apt_packages[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${apt_packages[@]}"
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi

# Reinstall only when pyproject.toml or the requested extras changed.
stamp="$venv/.installed-${extras:-base}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing trioka${extras:+[$extras]} into $venv"
  spec="."; [ -n "$extras" ] && spec=".[$extras]"
  # pip's and setuptools' chatter goes to a log that is shown only when something fails.
  pip_log="$venv/pip-install.log"
  if ! { "$venv/bin/python" -m pip install -q --upgrade pip &&
         "$venv/bin/python" -m pip install -q -e "$spec"; } >"$pip_log" 2>&1; then
    cat "$pip_log" >&2
    echo "setup: pip install failed (log: $pip_log)" >&2
    exit 1
  fi
  touch "$stamp"
fi
