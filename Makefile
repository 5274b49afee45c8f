# The two commands of the README: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo demo-zk test setup setup-dev lint bench clean

# The ZK-mode demo and the tests run a real ZooKeeper (Debian's package, with its Java runtime);
# `make demo` (Raft mode: controller processes, no ZooKeeper) needs only Python. `trioka cluster up
# --netns` (the chaos tests' partitions) needs ip and iptables (its nf_tables backend).
# docker-compose: CI validates docker-compose.yml with `docker-compose config` (no daemon needed).
APT_PACKAGES := zookeeper docker-compose iptables nftables iproute2
# The report's page is looked at in a headless Chromium (`make report-screenshot`, the analytics
# tests): Debian's chromium, for the dev and analytics setups only.
REPORT_APT_PACKAGES := chromium

setup:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh

# The tests include the analytics job (PySpark), so the dev setup installs that extra too.
setup-dev:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES) $(REPORT_APT_PACKAGES)" bash scripts/setup.sh dev,analytics

# 3 controllers (Raft quorum) + 3 brokers: a replicated topic, a leader SIGKILLed, all consumed.
demo: setup
	@bash scripts/demo.sh

# The same story on ZooKeeper + 3 brokers (issue 3's cluster).
demo-zk: setup
	@bash scripts/demo.sh zk

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The Docker e2e (tests/e2e: dockerd, images, the raft profile; ~90 s cold) runs last;
# TRIOKA_E2E_DOCKER=0 leaves it out.
test: lint
	TRIOKA_E2E_DOCKER=$${TRIOKA_E2E_DOCKER:-1} $(BIN)/pytest --durations=25 $(PYTEST_ARGS)

bench: setup-dev
	$(BIN)/python bench/run_single_broker.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis

# Issue 3's and 4's benchmarks (docs/benchmarks.md): 3-broker clusters of real processes.
# bench-failover and bench-metadata run ZK mode and Raft mode side by side (MODE=zk|raft|both).
.PHONY: bench-cluster bench-failover bench-metadata
BENCH_CLUSTER_ARGS ?= --runs 3
FAILOVER_PARTITIONS ?= 3000
MODE ?= both
METADATA_ARGS ?= --clients 8 --writes 3000

bench-cluster: setup-dev
	$(BIN)/python bench/run_cluster.py $(BENCH_CLUSTER_ARGS)

bench-failover: setup-dev
	$(BIN)/python bench/run_failover.py --mode $(MODE) --partitions $(FAILOVER_PARTITIONS)

bench-metadata: setup-dev
	$(BIN)/python bench/run_metadata.py --mode $(MODE) $(METADATA_ARGS)

# Issue 15's scale curve: run_failover.py at 1,000-50,000 partitions, both modes, one table;
# SCALE_OUT keeps each run's output and telemetry (`trioka report --spool $(SCALE_OUT)/telemetry`).
.PHONY: bench-scale-curve
SCALE_OUT ?= scale-curve
bench-scale-curve: setup-dev
	$(BIN)/python bench/run_scale_curve.py --telemetry --out $(SCALE_OUT) $(SCALE_ARGS)

# Issue 5: log cleaner throughput on one 200 MB partition with 10,000 keys (docs/benchmarks.md).
.PHONY: bench-cleaner
CLEANER_ARGS ?=
bench-cleaner: setup-dev
	$(BIN)/python bench/run_cleaner.py $(CLEANER_ARGS)

# Issue 5: idempotent produce on/off (3-broker RF=3 clusters and the combined node) and consumer
# groups (OffsetCommit, rebalance, coordinator failover); MODE=zk|raft|both (docs/bench-notes-issue5.md).
.PHONY: bench-idempotence bench-groups
IDEMPOTENCE_ARGS ?=
GROUPS_ARGS ?=
bench-idempotence: setup-dev
	$(BIN)/python bench/run_idempotent_produce.py --mode $(MODE) $(IDEMPOTENCE_ARGS)

bench-groups: setup-dev
	$(BIN)/python bench/run_groups.py --mode $(MODE) $(GROUPS_ARGS)

# Issue 6: the compose cluster (README "Docker"). docker-setup installs docker.io, docker-compose
# and debootstrap if missing, starts our own dockerd (unix:///run/trioka-docker/docker.sock,
# --iptables=false), builds trioka-base:bookworm, the wheelhouse and trioka:dev. e2e-docker runs
# tests/e2e (a broker container killed, nothing lost: the zk profile, and the raft profile with
# docker-compose.secure.yml; then `trioka chaos run --docker` on the raft profile, seed 3: kill,
# partition, pause); its setup builds the ZooKeeper image too.
# docker-setup-secure also makes build/tls for docker-compose.secure.yml (TLS + SCRAM everywhere:
# a dev CA, the nodes' keys, the admin's login in build/tls/client.properties; README "Docker").
.PHONY: docker-setup docker-setup-secure docker-setup-monitoring docker-stop e2e-docker
docker-setup: setup-dev
	@bash scripts/docker-setup.sh

docker-setup-secure: setup-dev
	@bash scripts/docker-setup.sh --secure

# The compose `monitoring` profile's Prometheus image (Debian's package; docker-compose.yml).
docker-setup-monitoring: setup-dev
	@bash scripts/docker-setup.sh --monitoring

docker-stop:
	@bash scripts/docker-stop.sh

e2e-docker: setup-dev
	TRIOKA_E2E_DOCKER=1 $(BIN)/pytest -m docker --durations=0 tests/e2e $(PYTEST_ARGS)

# Issue 6: chaos runs against a local cluster of their own (docs/chaos.md). `make chaos` is a
# short run (the same seeds as tests/chaos); `make chaos-soak MODE=raft|zk` a long one with every
# nemesis that runs in namespaces (SOAK_NEMESES=kill,pause,controller,latency for the proxies
# instead); SEED, TIME_LIMIT and CHAOS_ARGS change it. Results (history.jsonl, verdict.json) go
# to CHAOS_OUT. Exit status: 0 valid, 1 anomalies, 2 harness error.
.PHONY: chaos chaos-soak
CHAOS_MODE = $(if $(filter both,$(MODE)),raft,$(MODE))
SEED ?= 39
TIME_LIMIT ?= 600
CHAOS_OUT ?= chaos-results
CHAOS_ARGS ?=
# The proxies (latency) and the namespaces (partition, zk-expiry) do not mix in one run yet.
SOAK_NEMESES ?= kill,pause,controller,partition,zk-expiry
chaos: setup-dev
	$(BIN)/python -m deploy.cli chaos run --mode $(CHAOS_MODE) --nemesis kill,pause,controller \
		--time-limit 25 --seed $(SEED) --out $(CHAOS_OUT)/chaos-$(CHAOS_MODE)-$(SEED) $(CHAOS_ARGS)

# Issue 16: the network fuzz suite at any size (CI runs 20,000 frames with its fixed seed).
.PHONY: fuzz
FUZZ_FRAMES ?= 200000
FUZZ_SEED ?= $(shell date +%s)
fuzz: setup-dev
	TRIOKA_NET_FUZZ_FRAMES=$(FUZZ_FRAMES) TRIOKA_NET_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/pytest -q tests/integration/broker/test_broker_fuzz.py

chaos-soak: setup-dev
	$(BIN)/python -m deploy.cli chaos run --mode $(CHAOS_MODE) \
		--nemesis $(SOAK_NEMESES) --time-limit $(TIME_LIMIT) --seed $(SEED) \
		--out $(CHAOS_OUT)/soak-$(CHAOS_MODE)-$(SEED) $(CHAOS_ARGS)

# Issue 7: the telemetry report (README "Reports"): PySpark (the analytics extra) on Java.
# `make report` reads the cluster of `trioka cluster up` (CLUSTER_DIR, default .trioka-cluster)
# or BOOTSTRAP=HOST:PORT; REPORT_OUT is where report.html, the PNGs and tables/ go.
.PHONY: setup-analytics report
CLUSTER_DIR ?= .trioka-cluster
BOOTSTRAP ?=
REPORT_OUT ?= reports
REPORT_ARGS ?=
setup-analytics:
	@TRIOKA_APT_PACKAGES="default-jre-headless $(REPORT_APT_PACKAGES)" bash scripts/setup.sh analytics

report: setup-analytics
	$(BIN)/trioka report $(if $(BOOTSTRAP),--bootstrap-server $(BOOTSTRAP),--cluster-dir $(CLUSTER_DIR)) \
		--out $(REPORT_OUT) $(REPORT_ARGS)

# Issue 17: look at the rendered page: a headless Chromium screenshot of $(REPORT_OUT)/report.html
# (make report first) into $(SCREENSHOT) (docs/report.png is one, referenced from the README).
.PHONY: report-screenshot
SCREENSHOT ?= $(REPORT_OUT)/report.png
report-screenshot: setup-analytics
	$(BIN)/python -m analytics.screenshot $(REPORT_OUT)/report.html $(SCREENSHOT)

# Issue 7: telemetry cost, broker CPU per produced record with the shipper on vs off
# (interleaved pairs of fresh 3-broker clusters; docs/benchmarks.md). MODE=raft|zk.
.PHONY: bench-telemetry
TELEMETRY_ARGS ?= --pairs 5
bench-telemetry: setup-dev
	$(BIN)/python bench/run_telemetry_cost.py --mode $(CHAOS_MODE) $(TELEMETRY_ARGS)

# Issue 6: a chaos run against the compose cluster (docs/chaos.md "Against the compose cluster"):
# profile MODE=raft|zk, brought up (and down) by the run unless one is already up. Needs our
# dockerd and the images: `make docker-setup` (and `scripts/docker-setup.sh --zk` for zk).
.PHONY: chaos-docker
DOCKER_NEMESES ?= kill,pause,controller,partition,zk-expiry
DOCKER_SEED ?= 2
DOCKER_TIME_LIMIT ?= 60
chaos-docker: setup-dev
	DOCKER_HOST=$${DOCKER_HOST:-unix:///run/trioka-docker/docker.sock} \
	$(BIN)/python -m deploy.cli chaos run --docker --mode $(CHAOS_MODE) --nemesis $(DOCKER_NEMESES) \
		--time-limit $(DOCKER_TIME_LIMIT) --seed $(DOCKER_SEED) \
		--out $(CHAOS_OUT)/docker-$(CHAOS_MODE)-$(DOCKER_SEED) $(CHAOS_ARGS)
