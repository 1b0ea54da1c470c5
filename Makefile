# Two commands do all the set-up on a fresh machine:
#   make dashboard   install, index sample_data on first start, serve the dashboard
#   make test        install, then run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install browser dashboard test lint

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: pip then takes the CPU build, never the CUDA packages.
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

dashboard: install
	$(BIN)/streamlit run dashboard/app.py

# The browser tests drive Debian's Chromium (Playwright's own browser download cannot work offline).
browser:
	@command -v chromium >/dev/null || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

test: install browser
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check core dashboard tests
