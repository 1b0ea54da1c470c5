# Two commands do all the set-up on a fresh machine:
#   make dashboard   install, index sample_data on first start, serve the dashboard
#   make test        install, then run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch's CPU build, which PyPI does not serve: wheels/index.html lists it with its hash for
# uv.lock, and the file is linked in from TORCH_WHEEL_DIR (where this machine keeps it).
TORCH_WHEEL := torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
TORCH_WHEEL_DIR ?= /opt/wheels
# The installer, at the version uv.lock holds (the lock keeps it in the dev extra).
UV_VERSION := $(shell awk '/^name = "uv"$$/ {getline; gsub(/[^0-9.]/, ""); print; exit}' uv.lock)

.PHONY: install upgrade system-packages ocr-packages dashboard test test-fast lint

wheels/$(TORCH_WHEEL):
	@test -f "$(TORCH_WHEEL_DIR)/$(TORCH_WHEEL)" || { \
	  echo "torch's CPU wheel $(TORCH_WHEEL) is not in $(TORCH_WHEEL_DIR): download it from \
	https://download.pytorch.org/whl/cpu/torch/ and run make with TORCH_WHEEL_DIR set to its folder."; \
	  exit 1; }
	ln -sf "$(abspath $(TORCH_WHEEL_DIR))/$(TORCH_WHEEL)" $@

# uv itself from the registry, once per environment; `uv sync` then keeps the locked copy.
$(BIN)/uv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"

# Exactly the lock: every package at its locked version, each file checked against its hash,
# anything else in the environment removed. `--locked` refuses a lock that no longer matches
# pyproject.toml instead of quietly resolving a new one.
$(STAMP): pyproject.toml uv.lock wheels/$(TORCH_WHEEL) | $(BIN)/uv
	$(BIN)/uv sync --locked --extra dev
	touch $(STAMP)

# Refreshes the lock on purpose (every package to the newest release pyproject.toml allows),
# installs exactly the new lock and runs the whole suite on it.
upgrade: wheels/$(TORCH_WHEEL) | $(BIN)/uv
	$(BIN)/uv lock --upgrade
	$(MAKE) test

# The embedding model is loaded once here, so its ONNX export (once per model and library
# version) is not paid by the first ingest or dashboard start.
install: $(STAMP)
	-$(BIN)/evidence models --prepare || true

dashboard: install ocr-packages
	$(BIN)/streamlit run dashboard/app.py

# The OCR engine that reads PDF pages without a text layer (Debian's tesseract). Without it
# such pages are reported unreadable, in one sentence that says why.
ocr-packages:
	@command -v tesseract >/dev/null || { \
	  echo "Installing Debian's tesseract-ocr (reads scanned PDF pages)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    tesseract-ocr tesseract-ocr-eng) || echo "tesseract-ocr could not be installed: \
	scanned PDF pages will be reported unreadable."; }

# Debian packages the tests use: chromium for the browser tests (Playwright's own browser
# download cannot work offline), strace to watch the network traffic of a real run, nginx
# and openssl for the shared server behind a TLS proxy (tests/tls_proxy.py).
system-packages:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v strace >/dev/null || missing="$$missing strace"; \
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages for the tests:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Two workers (pytest-xdist), one test file each at a time: a file's shared fixtures (a
# store built once, a server started once) stay in one process. Files start in the order
# tests/conftest.py gives them (longest first), not xdist's order by number of tests.
test: install system-packages ocr-packages
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The inner loop: no real embedding model, no server, no browser.
test-fast: install
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not model and not server and not browser and not scale"

lint: install
	$(BIN)/ruff check core dashboard tests
