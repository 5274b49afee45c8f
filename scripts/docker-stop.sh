#!/usr/bin/env bash
# `make docker-stop`: stop the dockerd that scripts/docker-setup.sh started, by its pidfile, and
# nothing else (a daemon someone else started on our socket has no started-by marker).
set -euo pipefail
run_dir="${TRIOKA_DOCKER_DIR:-/run/trioka-docker}"
pidfile="$run_dir/dockerd.pid"
marker="$run_dir/started-by-docker-setup"
sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"

if [ ! -f "$marker" ] || [ ! -f "$pidfile" ]; then
  echo "docker-stop: no dockerd started by docker-setup ($pidfile)"; exit 0
fi
pid="$(cat "$pidfile")"
# Only a live dockerd under that pid (the pidfile may be stale and the pid reused).
if [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != dockerd ]; then
  echo "docker-stop: pid $pid is not a running dockerd; nothing to stop"
  $sudo_cmd rm -f "$marker"; exit 0
fi
echo "docker-stop: stopping dockerd (pid $pid)"
$sudo_cmd kill -TERM "$pid"
deadline=$((SECONDS + 30))
while [ -e "/proc/$pid" ]; do
  if ((SECONDS > deadline)); then
    echo "docker-stop: dockerd (pid $pid) still running after 30 s" >&2; exit 1
  fi
  sleep 0.2  # polling a condition with a deadline (the daemon's exit)
done
$sudo_cmd rm -f "$marker"
