# Every target sets itself up: a fresh clone needs only Python 3.11+ (and Node 22+ for the CDK CLI).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export AWS_DEFAULT_REGION ?= us-east-1

# Node 22+ for the CDK CLI and the CDK library's jsii runtime (Node 20 is end-of-life): the
# machine's own when it is new enough, else Node 22 from the npm registry (npm's `node`
# package) into .shepherd/node, first on every recipe's PATH (tests included).
NODE_MAJOR := 22
NODE_DIR := .shepherd/node
export PATH := $(CURDIR)/$(NODE_DIR)/node_modules/.bin:$(PATH)
# Bytecode of what any process imports, compiled once and kept in one folder outside the
# source tree (uv installs without compiling, and Python writes no __pycache__ here): every
# local stack's 16 processes, each CLI run and each shard compiled boto3, moto, Powertools and
# the engine from source again, about 1 s of CPU a process (issue 36: `make demo`'s workflows
# took 107 s of CPU without it, 63 s with it, on one loaded machine).
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: dev test lint format mypy unit demo clean openapi synth cdk-nag infra-tests browser

# $(call pip_install,VENV,ARGS): ARGS installed into VENV by uv, or by pip when uv fails.
UV_VERSION := 0.13.9
define pip_install
$(1)/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) \
	&& $(1)/bin/uv pip install --quiet --python $(1)/bin/python $(2) \
	|| $(1)/bin/python -m pip install --quiet $(2)
endef

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# The distribution was called `shepherd` before it became `shepherd-workflows`: an old
	@# editable install would map the `shepherd` package a second time.
	$(BIN)/python -m pip uninstall --quiet --yes shepherd 2>/dev/null || true
	@# The runtime's dependencies are ranges (pyproject.toml); this repository and its CI run
	@# with the exact versions constraints.txt pins. Installed by uv (its downloads in
	@# parallel: a fresh clone's setup measured at 6 s of CPU against pip's 75 s), pip if
	@# uv cannot reach the index (uv reads no pip.conf).
	$(call pip_install,$(VENV),-c constraints.txt -e '.[dev]')
	@# The simulator, the benchmarks and the example agents are not in the distribution: this
	@# checkout's tools/ and examples/ go on the venv's path instead.
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "shepherd-checkout.pth").write_text("$(CURDIR)/tools\n$(CURDIR)/examples\n")'
	touch $(STAMP)

dev: $(STAMP) browser

.PHONY: node
node: $(NODE_DIR)/.installed

$(NODE_DIR)/.installed:
	@if node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= $(NODE_MAJOR) ? 0 : 1)' 2>/dev/null; then mkdir -p $(NODE_DIR); else echo "Node $(NODE_MAJOR) for the CDK into $(NODE_DIR)"; npm install --prefix $(NODE_DIR) --no-audit --no-fund --silent node@$(NODE_MAJOR); fi
	touch $@

# The OS's Chromium for the console's browser tests (apt-get when missing; quick when there).
browser:
	@tools/ensure-chromium.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

mypy: $(STAMP)
	$(BIN)/mypy layers/shepherd/python/shepherd functions tools infra examples

# The suite in two pytest processes on the two cores, split by folder so that no session
# fixture starts twice (pytest-xdist's workers each started their own and were slower): the
# local stack's tests (tests/e2e, tests/console) and the CDK app's (tests/infra) in one, every
# other folder in the other (a new folder lands there by itself). The quick folders (unit,
# contract, statemachines: about 45 s) go with the stacks, which start beside mypy and so have
# that much more room (measured on a fresh clone: 744 s + test-lowest's 58 s against mypy's 47 s
# + 844 s). So do the simulator's two longest files (its stateful fault search and the happy
# path's look-ahead: about a fifth of tests/sim, CPU-bound, no session fixture): the stacks'
# tests mostly wait on clocks, and their processes start quicker since bytecode is cached
# (PYTHONPYCACHEPREFIX above). So does the ASL bench (about 26 s): a fresh clone of 876eab9
# measured the stacks' side at 727 s + test-lowest's 59 s against mypy's 39 s + 812 s.
# Each prints its own timing report (tests/timing_report.py) when it ends; make prints each
# one's output whole.
SHARD_STACKS := tests/infra tests/e2e tests/console tests/unit tests/contract tests/statemachines \
	tests/sim/test_sim_stateful.py tests/sim/test_sim_happy_path.py tests/bench/test_asl_bench.py
.PHONY: unit-stacks unit-rest
unit: $(STAMP) browser node
	$(MAKE) --no-print-directory -j2 -k --output-sync=target unit-stacks unit-rest

unit-stacks: $(STAMP) browser node
	@t=$$(date +%s); $(BIN)/pytest $(SHARD_STACKS); rc=$$?; \
	echo "unit-stacks: $$(( $$(date +%s) - t ))s"; exit $$rc

unit-rest: $(STAMP) node
	@t=$$(date +%s); $(BIN)/pytest $(addprefix --ignore=,$(SHARD_STACKS)); rc=$$?; \
	echo "unit-rest: $$(( $$(date +%s) - t ))s"; exit $$rc

# The runtime's dependencies at the lowest versions pyproject.toml allows (issue 39.1: tested at
# both ends of each range; the rest of the suite runs at constraints.txt's pins, the newest when
# they were pinned). Its own environment, and the tests that drive what those libraries do: the
# API and the workers through Powertools and pydantic, the event relay, the stores' boto3 on
# moto. Not here: docs/openapi.json's exact text (pydantic words a schema differently by version).
LOW_VENV := .venv-lowest
LOW_TESTS := tests/contract tests/handlers/test_api.py tests/handlers/test_workers.py \
	tests/handlers/test_stream.py tests/handlers/test_hostile_input.py \
	tests/handlers/test_callbacks_hardened.py
$(LOW_VENV)/.installed: pyproject.toml $(STAMP)
	test -x $(LOW_VENV)/bin/python || $(PYTHON) -m venv $(LOW_VENV)
	$(BIN)/python tools/wheel_check.py --print-lowest-constraints > $(LOW_VENV)/constraints.txt
	$(call pip_install,$(LOW_VENV),-c $(LOW_VENV)/constraints.txt -e '.[cli]' pytest hypothesis)
	$(LOW_VENV)/bin/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "shepherd-checkout.pth").write_text("$(CURDIR)/tools\n$(CURDIR)/examples\n")'
	touch $@

.PHONY: test-lowest
test-lowest: $(LOW_VENV)/.installed
	@t=$$(date +%s); $(LOW_VENV)/bin/pip freeze | grep -iE '^(boto3|aws[-_]lambda[-_]powertools|pydantic)=='; \
	$(LOW_VENV)/bin/pytest -q -p no:cacheprovider $(LOW_TESTS); rc=$$?; \
	echo "test-lowest: $$(( $$(date +%s) - t ))s"; exit $$rc

.PHONY: setup check test-stores
setup: $(STAMP) browser node

# What CI runs (.ci/run): every stage in turn, each one's time and the whole run's printed at the
# end (pytest prints its own per folder and its 30 slowest tests: tests/timing_report.py). The
# last stage keeps both cores busy: mypy and the two pytest shards, two at a time (mypy beside
# the shard of the local stacks and the CDK app, whose tests wait on clocks and subprocesses; the
# other shard when mypy is done), each printing its own time; -k: one that fails stops no other.
TEST_STAGES := setup lint suite
.PHONY: suite mypy-timed
suite: $(STAMP) browser node
	$(MAKE) --no-print-directory -j2 -k --output-sync=target mypy-timed unit-stacks unit-rest test-lowest

mypy-timed: $(STAMP)
	@t=$$(date +%s); $(MAKE) --no-print-directory mypy; rc=$$?; \
	echo "mypy: $$(( $$(date +%s) - t ))s"; exit $$rc

test:
	@t0=$$(date +%s); rc=0; times=""; \
	for stage in $(TEST_STAGES); do \
	  t=$$(date +%s); $(MAKE) --no-print-directory $$stage || { rc=$$?; times="$$times $$stage:failed"; break; }; \
	  times="$$times $$stage:$$(( $$(date +%s) - t ))s"; \
	done; \
	echo "make test:$$times, $$(( $$(date +%s) - t0 ))s in all ($$(( ($$(date +%s) - t0) / 60 )) min)"; \
	exit $$rc

# The quick loop while developing: lint, then types beside the unit and engine tests (two
# cores), the slow ones (marked `slow`: a project's own install) left to `make test`, which adds
# the store contracts, the handlers, the CDK app, the console, the simulators and the
# end-to-end runs. The unit and the engine tests run as two processes beside mypy: much of
# their time is waiting (threads, a local gateway's timeouts), so three fit on two cores
# (measured on an idle 2-core machine with mypy's cache: 133 s as one process, the engine tests'
# 90 s of it; docs/architecture.md, "For contributors").
CHECK_TESTS := pytest -q -m 'not slow and not e2e'
.PHONY: check-tests check-unit check-integration
check: lint
	$(MAKE) --no-print-directory -j3 --output-sync=target mypy check-unit check-integration

check-tests: check-unit check-integration

check-unit: $(STAMP)
	$(BIN)/$(CHECK_TESTS) tests/unit

check-integration: $(STAMP)
	$(BIN)/$(CHECK_TESTS) tests/integration

# The engine's tests on DynamoDB (moto) as well as in memory (tests/support.py, ENGINE_STORES):
# the store contract tests prove the two alike, so `make test` runs them in memory only.
test-stores: $(STAMP)
	SHEPHERD_ENGINE_STORES=memory,dynamodb $(BIN)/pytest tests/integration

openapi: $(STAMP)
	$(BIN)/python -m shepherd_cli.openapi

# `make demo PORT=8080 MOTO_PORT=5000 CONSOLE_PORT=8081`: fixed ports (default: any free one).
# `make demo ONLY=workflows` or `ONLY=outage`: one of its two phases, on a stack of its own.
demo: $(STAMP)
	$(BIN)/python -m shepherd_cli.demo $(if $(ONLY),--only $(ONLY)) $(if $(PORT),--port $(PORT)) $(if $(MOTO_PORT),--moto-port $(MOTO_PORT)) $(if $(CONSOLE_PORT),--console-port $(CONSOLE_PORT))

# Deterministic fault simulation (docs/simulation.md): `make sim SEEDS=10000 JOBS=2`,
# `make sim FAULTS=dup=0.2,lose=0.1`, replay one seed with its trace: `make sim SEED=1234`.
# Three passes: the engine's workload, the state machines (aslsim), and loops (issue 42.5:
# `sim_repeat` workflows alone, under the same faults).
.PHONY: sim
SEEDS ?= 1000
FIRST ?= 0
JOBS ?= 1
sim: $(STAMP)
	$(BIN)/python -m shepherd_sim $(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --first $(FIRST) --jobs $(JOBS)) $(if $(FAULTS),--faults '$(FAULTS)')
	$(BIN)/python -m shepherd_sim.aslsim $(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --first $(FIRST))
	$(BIN)/python -m shepherd_sim --types sim_repeat $(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --first $(FIRST) --jobs $(JOBS)) $(if $(FAULTS),--faults '$(FAULTS)')

# The Amazon States Language conformance suite (issue 42, tests/statemachines/conformance): passed and
# failed per feature; exit 1 on any failure.
.PHONY: conformance
conformance: $(STAMP)
	$(BIN)/python -m shepherd_asl_conformance

# The map protocol's fault simulator (issue 24, docs/simulation.md "Maps"): `make mapsim
# SEEDS=500`, one large map with its bounded-read figures: `make mapsim ITEMS=10000`.
.PHONY: mapsim
ITEMS ?=
mapsim: $(STAMP)
	$(BIN)/python -m shepherd_sim.mapsim $(if $(ITEMS),--items $(ITEMS),--seeds $(SEEDS))

# The child-workflow protocol's fault simulator (issue 24, docs/simulation.md "Child workflows").
.PHONY: childsim
childsim: $(STAMP)
	$(BIN)/python -m shepherd_sim.childsim --seeds $(SEEDS)

# The CDK CLI pinned in package.json; no Docker, no AWS credentials, no context lookups.
NODE_STAMP := node_modules/.installed

$(NODE_STAMP): package.json package-lock.json | node
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

synth: $(STAMP) node $(NODE_STAMP)
	npx cdk synth --quiet

# cdk-nag (AwsSolutions + Serverless), CDK assertions, drift and cfn-lint checks on the app, the
# deploy rehearsal (functions rebuilt from cdk.out, run against moto; pip cache in .shepherd/cache)
# and the check of every SDK call the handlers make against their IAM statements.
infra-tests: $(STAMP) node
	$(BIN)/pytest tests/infra

cdk-nag: infra-tests

# Before pinning a new Powertools release: its public SSM parameter exists in every region the
# README promises (needs credentials for any account; read-only).
.PHONY: powertools-layer-check
powertools-layer-check: $(STAMP)
	$(BIN)/python tools/release_check.py

# The distribution as a team installs it (tools/wheel_check.py; no credentials): build the
# wheel and the sdist, check their metadata (twine check), install the wheel into a clean
# virtualenv with the lowest dependency versions pyproject.toml allows, import it, run a
# workflow, and run a `shepherd init` project's tests there. A few minutes.
.PHONY: release-check
release-check: $(STAMP)
	$(BIN)/python tools/wheel_check.py

clean:
	rm -rf $(VENV) $(LOW_VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache

# Benchmarks -> docs/benchmarks.md + docs/benchmarks.json: cost per step (modelled from every
# metered request), supervisor scaling, detection lag, throughput, cold start. Prints numbers,
# asserts nothing. Quick run: `make bench BENCH_ARGS='--workflows 10 --stalls 200'`.
.PHONY: bench
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m shepherd_bench $(BENCH_ARGS)

# ASL state machines (issue 42): a mix of four machines through the real handlers on moto
# (dollars per million transitions beside Step Functions Standard's) and a loop's requests per
# iteration over 10,000 iterations; writes benchmarks.json's `asl` (also a part of make bench).
.PHONY: bench-asl
bench-asl: $(STAMP)
	$(BIN)/python -m shepherd_bench --refresh-asl

# Hostile patterns (issue 35.1): StringMatches against a 5 MiB value, the worst patterns the
# caps allow; prints each case and exits 1 if the slowest takes a second (also a line of make bench).
.PHONY: bench-patterns
bench-patterns: $(STAMP)
	$(BIN)/python -m shepherd_bench.patterns

# The console's counts (issue 35.5): one caller's 10,000 workflows on the local stack's moto,
# counted per status as GET /workflows/counts counts them; prints wall and CPU time of each way
# and exits 1 unless the unfiltered count is exact and needs under 2 s.
.PHONY: bench-counts
bench-counts: $(STAMP)
	$(BIN)/python -m shepherd_bench.counts

# The scale model (issue 23.9; docs/benchmarks.md, "Scale model"): the real engine over a
# modelled DynamoDB, SQS and Lambda at the design load, in simulated time, a subset of shard
# groups at full density -> `scale` and `cost.at_load` in docs/benchmarks.json and its section of
# docs/benchmarks.md. Exits non-zero when a target falls short, naming it (`scale.passed`);
# about 20 minutes on 2 busy cores (1 of 128 groups). Quick run (printed only, a minute):
# `make scale SCALE_ARGS=--quick`; one run again, the others kept: `make scale
# SCALE_ARGS=--only=stall`; N times the design load against the default deployment, saying
# what broke first: `make scale LOAD=10`; against another of the CDK app's sizes (runs are
# judged against exactly its values, infra/shepherd_infra/deployments.py): `make scale LOAD=1
# SIZE=design_load`.
.PHONY: scale
SCALE_ARGS ?=
LOAD ?=
SIZE ?=
scale: $(STAMP)
	$(BIN)/python -m shepherd_bench.scale $(if $(LOAD),--load $(LOAD)) $(if $(SIZE),--size $(SIZE)) $(SCALE_ARGS)
