# Two promises of the README: `make demo` runs the main job, `make test` runs every test.
# Both set up the virtualenv at .venv/ first; nothing else needs to be installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The official RocketMQ 5 Python client, in its own virtualenv: its generated stubs clash with
# ours in one process (two copies of the same descriptor names). The compatibility test runs it.
OFFICIAL := .venv-rocketmq
# Pinned with every dependency: tests/official-client-requirements.txt (rocketmq-python-client 5.1.2).
OFFICIAL_STAMP := $(OFFICIAL)/.installed
# The official RocketMQ 5 Node.js client, pinned with every dependency in its package-lock.json;
# tests/integration/test_node_client.py runs it. npm ci installs exactly the lock, no install scripts.
NODE_CLIENT := tests/node-client
NODE_STAMP := $(NODE_CLIENT)/node_modules/.installed

.PHONY: setup demo console lint format test bench proto clean cluster cluster-down

setup: $(STAMP)

# The package declares compatible ranges; constraints.txt pins the exact versions installed here.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==26.3
	$(BIN)/pip install --quiet -c constraints.txt --build-constraint constraints.txt -e '.[test,pipeline,console]'
	touch $(STAMP)
	@echo "rocketstore is installed in $(BIN)/: run '. $(BIN)/activate' to put it on your PATH"

$(OFFICIAL_STAMP): tests/official-client-requirements.txt
	$(PYTHON) -m venv $(OFFICIAL)
	$(OFFICIAL)/bin/pip install --quiet -r tests/official-client-requirements.txt
	touch $(OFFICIAL_STAMP)

$(NODE_STAMP): $(NODE_CLIENT)/package-lock.json
	cd $(NODE_CLIENT) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(NODE_STAMP)

demo: $(STAMP)
	$(BIN)/rocketstore demo

# The web console on http://127.0.0.1:8080/: on the compose cluster when it runs (log in as admin
# with .cluster/replication_secret), else on a SYNC_MASTER and its slave started for it (the
# console prints where their admin secret is). Ctrl-C stops it (and the pair).
COMPOSE_ENDPOINTS := 127.0.0.1:10911;127.0.0.1:10921;127.0.0.1:10931
console: $(STAMP)
	@if [ -f .cluster/replication_secret ] && $(BIN)/rocketstore health --endpoint 127.0.0.1:10911 \
		--secret-file .cluster/replication_secret >/dev/null 2>&1; then \
		$(BIN)/rocketstore console --endpoint "$(COMPOSE_ENDPOINTS)" --secret-file .cluster/replication_secret; \
	else \
		$(BIN)/rocketstore console --local-pair; \
	fi

# The formatter's check, the linter and the type checker (configured in pyproject.toml) run
# before every test run; `make format` applies the formatter.
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .

test: $(STAMP) $(OFFICIAL_STAMP) $(NODE_STAMP) lint
	$(BIN)/python -m pytest

# The docker-compose cluster (docker-compose.yml): engine, images and secret made ready by
# deploy/prepare.sh, then the group started and its status shown once a master is elected.
# `make cluster PROFILE=two-groups` adds the second group. On a running cluster with nothing
# changed it restarts nothing (the images keep their ids, so compose has nothing to recreate).
PROFILE ?=
cluster: $(STAMP)
	deploy/prepare.sh
	deploy/compose.sh $(if $(PROFILE),--profile $(PROFILE)) up -d
	$(BIN)/python -m harness.compose_status --secret-file .cluster/replication_secret --wait-s 120 \
		$(if $(PROFILE),--profile $(PROFILE))

# Every profile's services, so that a cluster started with one goes too.
cluster-down:
	deploy/compose.sh --profile two-groups --profile monitoring down --volumes --remove-orphans

bench: $(STAMP)
	$(BIN)/python -m bench.broker_bench --quick
	$(BIN)/python -m bench.store_put_bench --quick
	$(BIN)/python -m bench.store_read_bench --quick

proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) $(OFFICIAL) $(NODE_CLIENT)/node_modules .pytest_cache .hypothesis build *.egg-info
