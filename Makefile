# The two commands of the README: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test setup setup-dev lint unit bench clean

# The demo's cluster and the tests run a real ZooKeeper (Debian's package, with its Java runtime).
APT_PACKAGES := zookeeper

setup:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh

setup-dev:
	@TRIOKA_APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh dev

demo: setup
	@bash scripts/demo.sh

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

# Issue 3's benchmarks (docs/benchmarks.md): a 3-broker ZooKeeper-mode cluster of real processes.
.PHONY: bench-cluster bench-failover
BENCH_CLUSTER_ARGS ?= --runs 3
FAILOVER_PARTITIONS ?= 3000

bench-cluster: setup-dev
	$(BIN)/python bench/run_cluster.py $(BENCH_CLUSTER_ARGS)

bench-failover: setup-dev
	$(BIN)/python bench/run_failover.py --partitions $(FAILOVER_PARTITIONS)
