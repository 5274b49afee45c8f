#!/usr/bin/env bash
# `make demo`: one standalone broker, a topic, a few records produced and consumed through the
# CLI, the topic described, then the broker stopped. Everything lives in a mktemp directory;
# the broker is stopped (SIGTERM, then SIGKILL if it lingers) on any exit, by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."

trioka=".venv/bin/trioka"
[ -x "$trioka" ] || { echo "demo: $trioka is missing; run 'make setup' first" >&2; exit 1; }

work="$(mktemp -d -t trioka-demo.XXXXXX)"
broker_pid=""

cleanup() {
  local status=$?
  if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -TERM "$broker_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do  # up to 10 s for a graceful shutdown
      kill -0 "$broker_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$broker_pid" 2>/dev/null; then
      echo "demo: broker $broker_pid ignored SIGTERM; killing it" >&2
      kill -KILL "$broker_pid" 2>/dev/null || true
    fi
    wait "$broker_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] && [ -f "$work/broker.log" ]; then
    echo "demo: failed; last broker log lines:" >&2
    tail -n 20 "$work/broker.log" >&2 || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port, so the demo never collides with a broker already on 9092.
port="$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
bootstrap="127.0.0.1:$port"
topic="demo-events"

if [ -t 1 ]; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '==> %s\n' "$*"; }
fi

say "starting a standalone broker on $bootstrap (data in $work/data)"
TRIOKA_LOG_FORMAT=json "$trioka" broker start \
  --override "listeners=PLAINTEXT://$bootstrap" \
  --override "log.dirs=$work/data" \
  >"$work/broker.log" 2>&1 &
broker_pid=$!

deadline=$((SECONDS + 30))
until "$trioka" topic list -b "$bootstrap" -X socket.connection.setup.timeout.ms=1000 >/dev/null 2>&1; do
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    echo "demo: the broker exited while starting" >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "demo: the broker did not answer within 30 s" >&2
    exit 1
  fi
  sleep 0.1
done
say "broker $broker_pid is up"

say "creating topic $topic with 3 partitions"
"$trioka" topic create "$topic" -b "$bootstrap" --partitions 3 --replication-factor 1 \
  --config retention.ms=3600000

say "producing 5 keyed records (key:value lines on stdin)"
printf '%s\n' "user-1:signed up" "user-4:signed up" "user-1:added to cart" \
  "user-8:signed up" "user-1:checked out" |
  "$trioka" produce "$topic" -b "$bootstrap" --key-separator ":" --acks all

say "consuming them back from the beginning (JSON, one record a line)"
"$trioka" consume "$topic" -b "$bootstrap" --from-beginning --format json | tee "$work/consumed.jsonl"
consumed=$(wc -l <"$work/consumed.jsonl")

say "describing the topic"
"$trioka" topic describe "$topic" -b "$bootstrap"

say "stopping the broker (SIGTERM)"
kill -TERM "$broker_pid"
deadline=$((SECONDS + 30))
while kill -0 "$broker_pid" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "demo: broker did not stop within 30 s" >&2; exit 1; }
  sleep 0.1
done
wait "$broker_pid" && rc=0 || rc=$?
broker_pid=""

echo
echo "Summary: started a broker on $bootstrap, created '$topic' (3 partitions), produced 5 records,"
echo "consumed $consumed back (records with the same key share a partition, in order), and stopped"
echo "the broker gracefully (exit code $rc)."
[ "$consumed" -eq 5 ] && [ "$rc" -eq 0 ]
