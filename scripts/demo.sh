#!/usr/bin/env bash
# `make demo` (`scripts/demo.sh`, Raft mode) and `make demo-zk` (`scripts/demo.sh zk`): a local
# cluster on this machine (`trioka cluster up`). Raft mode: 3 controller processes (a Raft metadata
# quorum, node ids 3001-3003) and 3 brokers, no ZooKeeper, and the quorum is shown (`trioka quorum
# describe`); ZK mode: a real ZooKeeper and 3 brokers. Then the same story in both: a topic with 3
# replicas per partition (min.insync.replicas=2) is created, records are produced with acks=all,
# the leader of partition 0 is SIGKILLed (the controller notices after the 4 s session timeout and
# elects another leader), more records are produced while it is down; a consumer group reads the
# first records, then resumes at its committed offsets for the new ones (`trioka group describe`
# shows no lag); everything is consumed back, the cluster's status is shown, then `trioka cluster
# down`. Everything lives in a mktemp
# directory; the cluster is stopped (by the pids in its state file) on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-raft}"
case "$mode" in
  raft) ;;
  zk)
    # The cluster runs a real ZooKeeper from Debian's package (`make setup` installs it).
    [ -f /usr/share/java/zookeeper.jar ] || {
      echo "demo: ZooKeeper is missing; run 'make setup' first" >&2; exit 1; } ;;
  *) echo "usage: scripts/demo.sh [raft|zk]" >&2; exit 2 ;;
esac

trioka=".venv/bin/trioka"
[ -x "$trioka" ] || { echo "demo: $trioka is missing; run 'make setup' first" >&2; exit 1; }

work="$(mktemp -d -t trioka-demo.XXXXXX)"
cluster="$work/cluster"
cluster_started=""

cleanup() {
  local status=$?
  if [ -n "$cluster_started" ] && [ -f "$cluster/cluster.json" ]; then
    if [ "$status" -ne 0 ]; then
      echo "demo: failed; last log lines:" >&2
      tail -n 10 "$cluster"/*/*.log >&2 || true
    fi
    "$trioka" cluster down --dir "$cluster" --timeout 20 >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -t 1 ]; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '==> %s\n' "$*"; }
fi
topic="demo-events"

# Leader of a partition, from `trioka topic describe` (columns: Partition Leader Replicas ...).
leader_of() {
  "$trioka" topic describe "$topic" -b "$bootstrap" | awk -v p="$1" '$1 == p { print $2 }'
}

# host:port of the nodes in cluster.json's list $1 ("brokers" or "controllers"), except node $2.
addresses() {
  .venv/bin/python -c '
import json, sys
state = json.load(open(sys.argv[1]))
nodes = [n for n in state[sys.argv[2]] if n["node_id"] != int(sys.argv[3])]
print(",".join(n["host"] + ":" + str(n["port"]) for n in nodes))
' "$cluster/cluster.json" "$1" "${2:--1}"
}

cluster_started=1
if [ "$mode" = raft ]; then
  say "starting 3 controllers (a Raft quorum) and 3 brokers (trioka cluster up --mode raft, state in $cluster)"
  bootstrap="$("$trioka" cluster up --dir "$cluster" --mode raft --controllers 3 --brokers 3 \
    --session-timeout-ms 4000)"
  controllers="$(addresses controllers)"
  say "cluster is up; bootstrap servers: $bootstrap; controllers: $controllers"
  say "the metadata quorum (trioka quorum describe --status, then --replication)"
  "$trioka" quorum describe --bootstrap-controller "$controllers" --status
  "$trioka" quorum describe --bootstrap-controller "$controllers" --replication
  noticed="the controller fences broker %s once its heartbeats stop for 4 s"
  status_note="the quorum's roles; the killed broker is down and fenced, its replicas out of the ISR"
  down_note="brokers first, then the controllers"
  what="a Raft-mode cluster of 3 controllers and 3 brokers"
else
  say "starting ZooKeeper and 3 brokers (trioka cluster up --mode zk, state in $cluster)"
  bootstrap="$("$trioka" cluster up --dir "$cluster" --mode zk --brokers 3 --session-timeout-ms 4000)"
  say "cluster is up; bootstrap servers: $bootstrap"
  noticed="the ZooKeeper session of broker %s expires first"
  status_note="the killed broker is down, its replicas are out of the ISR"
  down_note="the brokers, then ZooKeeper"
  what="a 3-broker ZooKeeper-mode cluster"
fi
"$trioka" cluster describe --dir "$cluster"

say "creating topic $topic: 3 partitions, 3 replicas each, min.insync.replicas=2"
"$trioka" topic create "$topic" -b "$bootstrap" --partitions 3 --replication-factor 3 \
  --config min.insync.replicas=2
"$trioka" topic describe "$topic" -b "$bootstrap"

say "producing 5 keyed records with acks=all (key:value lines on stdin)"
printf '%s\n' "user-1:signed up" "user-4:signed up" "user-1:added to cart" \
  "user-8:signed up" "user-1:checked out" |
  "$trioka" produce "$topic" -b "$bootstrap" --key-separator ":" --acks all

say "consuming them as group demo-readers (creates __consumer_offsets; the group commits as it reads)"
"$trioka" consume "$topic" -b "$bootstrap" --group demo-readers --from-beginning

old_leader="$(leader_of 0)"
say "SIGKILL the leader of partition 0: broker $old_leader"
"$trioka" cluster kill "$old_leader" --dir "$cluster"

# Clients must not bootstrap from the dead broker alone: keep only the live ones' addresses.
bootstrap="$(addresses brokers "$old_leader")"

# shellcheck disable=SC2059  # $noticed is this script's own format
say "waiting for a new leader of partition 0 ($(printf "$noticed" "$old_leader"))"
deadline=$((SECONDS + 60))
while :; do
  new_leader="$(leader_of 0 2>/dev/null || true)"
  if [ -n "$new_leader" ] && [ "$new_leader" != "$old_leader" ] && [ "$new_leader" != "none" ]; then
    break
  fi
  [ "$SECONDS" -lt "$deadline" ] || { echo "demo: no new leader within 60 s" >&2; exit 1; }
  sleep 0.2
done
say "broker $new_leader leads partition 0 now"
"$trioka" topic describe "$topic" -b "$bootstrap"

say "producing 3 more records with acks=all while broker $old_leader is down (2 in-sync replicas are enough)"
printf '%s\n' "user-4:added to cart" "user-8:added to cart" "user-4:checked out" |
  "$trioka" produce "$topic" -b "$bootstrap" --key-separator ":" --acks all

say "group demo-readers resumes at its committed offsets: only the 3 new records"
"$trioka" consume "$topic" -b "$bootstrap" --group demo-readers
"$trioka" group describe demo-readers -b "$bootstrap"

say "consuming everything from the beginning without a group (JSON, one record a line)"
"$trioka" consume "$topic" -b "$bootstrap" --from-beginning --format json | tee "$work/consumed.jsonl"
consumed=$(wc -l <"$work/consumed.jsonl")

say "cluster status ($status_note)"
"$trioka" cluster status --dir "$cluster"

say "stopping the cluster (trioka cluster down: $down_note)"
"$trioka" cluster down --dir "$cluster"
cluster_started=""

echo
echo "Summary: ran $what, created '$topic' (3 partitions x 3 replicas),"
echo "produced 5 records with acks=all, SIGKILLed broker $old_leader (leader of partition 0);"
echo "broker $new_leader took over, 3 more records were produced; group demo-readers read the 5, then"
echo "resumed at its commits for the 3 new ones; $consumed of 8 records were consumed back from the"
echo "beginning. The cluster was stopped."
[ "$consumed" -eq 8 ]
