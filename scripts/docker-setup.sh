#!/usr/bin/env bash
# `make docker-setup`: everything the compose cluster needs on a Debian 12 host without an image
# registry. Idempotent: each step is skipped when its result is already there.
#   1. Debian packages docker.io, docker-compose, debootstrap (only when missing).
#   2. Our own dockerd (unless one already answers on our socket): --iptables=false and
#      --ip-masq=false so it never touches the host's firewall (the chaos suite's network
#      namespaces use iptables), --bridge=none (no docker0: our containers talk only on compose's
#      user-defined network and through ports published on 127.0.0.1, which the userland proxy
#      serves without iptables). Marked "started by docker-setup" so docker-stop.sh stops only it.
#   3. The base image trioka-base:bookworm from debootstrap (cached by name).
#   4. A wheelhouse of the project and its runtime dependencies, built on the host.
#   5. `docker build` of trioka:dev with --network none: the image installs from the wheelhouse.
#   6. With --analytics: trioka-analytics-base:bookworm (debootstrap: python3, python3-venv, Java 17
#      headless), a wheelhouse with the analytics extra (pyspark, ...: build/wheelhouse-analytics)
#      and trioka-analytics:dev (deploy/docker/Dockerfile.analytics), for the one-shot `analytics` service.
#   7. With --monitoring: trioka-prometheus:bookworm (debootstrap: Debian's prometheus package),
#      for the compose `monitoring` profile.
#   8. With --secure: build/tls for docker-compose.secure.yml (python -m deploy.docker.secure_setup:
#      a dev CA, a key and certificate per compose node and the admin, client.properties with the
#      admin's SCRAM login; whatever exists is kept, the password too). Needs no Docker.
# Usage: scripts/docker-setup.sh [--no-build] [--zk] [--analytics] [--monitoring] [--secure]
#   --no-build  stop after starting dockerd (and build/tls with --secure);  --zk  also build
#   trioka-zookeeper:bookworm;  --analytics  also build trioka-analytics:dev;  --monitoring  also
#   build trioka-prometheus:bookworm;  --secure  build/tls.
# The environment: TRIOKA_DOCKER_DIR (run dir, default /run/trioka-docker), TRIOKA_DOCKER_DATA
# (default /var/lib/trioka-docker), BASE_IMAGE (build from this image instead of the debootstrap
# one, e.g. python:3.11-slim where a registry is reachable), TRIOKA_IMAGE (default trioka:dev),
# ANALYTICS_BASE_IMAGE (python3 + venv + Java 17; default: the debootstrap one) and
# TRIOKA_ANALYTICS_IMAGE (default trioka-analytics:dev).
# Afterwards: export DOCKER_HOST=unix://$TRIOKA_DOCKER_DIR/docker.sock (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 zk=0 analytics=0 monitoring=0 secure=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --zk) zk=1 ;;
    --analytics) analytics=1 ;;
    --monitoring) monitoring=1 ;;
    --secure) secure=1 ;;
    *) echo "usage: scripts/docker-setup.sh [--no-build] [--zk] [--analytics] [--monitoring]" \
         "[--secure]" >&2
       exit 2 ;;
  esac
done

run_dir="${TRIOKA_DOCKER_DIR:-/run/trioka-docker}"
data_dir="${TRIOKA_DOCKER_DATA:-/var/lib/trioka-docker}"
socket="$run_dir/docker.sock"
pidfile="$run_dir/dockerd.pid"
base_image="trioka-base:bookworm"
zk_image="trioka-zookeeper:bookworm"
prometheus_image="${TRIOKA_PROMETHEUS_IMAGE:-trioka-prometheus:bookworm}"
analytics_base="trioka-analytics-base:bookworm"
image="${TRIOKA_IMAGE:-trioka:dev}"
analytics_image="${TRIOKA_ANALYTICS_IMAGE:-trioka-analytics:dev}"
export DOCKER_HOST="unix://$socket"
sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
say() { echo "docker-setup: $*"; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

install_packages() {
  local missing=()
  for pkg in docker.io docker-compose debootstrap; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  say "installing Debian packages: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
}

daemon_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_dockerd() {
  if daemon_answers; then say "dockerd already answers on $socket"; return 0; fi
  # Debian's dockerd (its docker-proxy beside it); /usr/local/bin may hold a client-only docker.
  local dockerd=/usr/sbin/dockerd proxy=/usr/sbin/docker-proxy
  [ -x "$dockerd" ] && [ -x "$proxy" ] || { say "missing $dockerd or $proxy" >&2; exit 1; }
  $sudo_cmd mkdir -p "$run_dir/exec" "$data_dir"
  say "starting dockerd (socket $socket, data $data_dir, log $run_dir/dockerd.log)"
  # setsid: the daemon outlives this script and a Ctrl-C in the caller's terminal.
  $sudo_cmd setsid "$dockerd" \
    --host "unix://$socket" --data-root "$data_dir" --exec-root "$run_dir/exec" \
    --pidfile "$pidfile" --iptables=false --ip-masq=false --ip6tables=false --bridge=none \
    --userland-proxy=true --userland-proxy-path "$proxy" \
    --default-address-pool base=172.29.0.0/16,size=24 \
    >"$run_dir/dockerd.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 30))
  until daemon_answers; do
    if ((SECONDS > deadline)); then
      say "dockerd did not answer within 30 s; last log lines:" >&2
      tail -n 20 "$run_dir/dockerd.log" >&2; exit 1
    fi
    sleep 0.2  # polling a condition with a deadline (the daemon's readiness)
  done
  touch "$run_dir/started-by-docker-setup"
}

# A debootstrap'ed Debian imported as an image (no registry here); $2: extra packages.
debootstrap_image() {
  local name="$1" include="$2" t0 rootfs
  if docker image inspect "$name" >/dev/null 2>&1; then say "$name present"; return 0; fi
  t0=$(now); rootfs="$(mktemp -d -t trioka-rootfs.XXXXXX)"
  say "building $name with debootstrap (about a minute)"
  if ! $sudo_cmd debootstrap --variant=minbase --include="$include" bookworm "$rootfs" \
      http://deb.debian.org/debian >"$rootfs.log" 2>&1; then
    tail -n 20 "$rootfs.log" >&2; $sudo_cmd rm -rf "$rootfs"; exit 1
  fi
  $sudo_cmd rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  $sudo_cmd tar -C "$rootfs" -c . | docker import - "$name" >/dev/null
  $sudo_cmd rm -rf "$rootfs" "$rootfs.log"
  say "$name built in $(took "$t0")"
}

# $1: the wheelhouse directory under build/, $2: what to wheel (the project, with extras).
build_wheelhouse() {
  local dir="build/$1" what="$2" t0 python
  python="$(host_python)"
  t0=$(now)
  rm -rf "$dir" && mkdir -p "$dir"
  "$python" -m pip wheel -q --wheel-dir "$dir" "$what" >"$dir.log" 2>&1 ||
    { cat "$dir.log" >&2; exit 1; }
  say "$1 built in $(took "$t0") ($(ls "$dir" | wc -l) wheels, $(du -sh "$dir" | cut -f1))"
}

# $1: the image, $2: the Dockerfile, $3: its BASE_IMAGE build argument (may be empty).
build_image() {
  local t0 args=()
  [ -n "$3" ] && args+=(--build-arg "BASE_IMAGE=$3")
  t0=$(now)
  # --network none: nothing inside the build reaches a network; pip reads the wheelhouse.
  docker build -q --network none -f "$2" -t "$1" "${args[@]}" . >/dev/null
  say "$1 built in $(took "$t0") ($(docker image inspect -f '{{.Size}}' "$1" |
    awk '{ printf "%d MB", $1 / 1e6 }'))"
}

# The project's Python (the cryptography package: `make setup`), else the system's.
host_python() { if [ -x .venv/bin/python ]; then echo .venv/bin/python; else echo python3; fi; }

# docker-compose.secure.yml's build/tls (see deploy/docker/secure_setup.py for the file modes).
secure_files() {
  local t0
  t0=$(now)
  "$(host_python)" -m deploy.docker.secure_setup build/tls | sed 's/^/docker-setup: /'
  say "build/tls ready in $(took "$t0")"
}

install_packages
((secure)) && secure_files
start_dockerd
if ((build)); then
  [ -n "${BASE_IMAGE:-}" ] || debootstrap_image "$base_image" python3,python3-venv
  ((zk)) && debootstrap_image "$zk_image" zookeeper,default-jre-headless,netcat-openbsd
  ((monitoring)) && debootstrap_image "$prometheus_image" prometheus
  # The project and its runtime dependencies only (no dev or analytics extras).
  build_wheelhouse wheelhouse .
  build_image "$image" deploy/docker/Dockerfile "${BASE_IMAGE:-}"
  if ((analytics)); then
    # PySpark 4 runs on Java 17: a base of its own, so the brokers' image stays small.
    [ -n "${ANALYTICS_BASE_IMAGE:-}" ] ||
      debootstrap_image "$analytics_base" python3,python3-venv,openjdk-17-jre-headless,procps
    build_wheelhouse wheelhouse-analytics '.[analytics]'
    build_image "$analytics_image" deploy/docker/Dockerfile.analytics "${ANALYTICS_BASE_IMAGE:-}"
  fi
fi
say "ready: export DOCKER_HOST=$DOCKER_HOST"
