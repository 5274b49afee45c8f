# The two commands of the README: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo demo-zk test setup setup-dev lint unit bench clean

# The ZK-mode demo and the tests run a real ZooKeeper (Debian's package, with its Java runtime);
# `make demo` (Raft mode: controller processes, no ZooKeeper) needs only Python. `trioka cluster up
# --netns` (the chaos tests' partitions) needs ip and iptables (its nf_tables backend).
APT_PACKAGES := zookeeper iptables nftables iproute2

setup:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh

setup-dev:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh dev

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

test: lint
	$(BIN)/pytest --durations=25 $(PYTEST_ARGS)

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
