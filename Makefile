# Two commands do all the set-up on a fresh machine:
#   make dashboard   install, index sample_data on first start, serve the dashboard
#   make test        install, then run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-packages ocr-packages dashboard test test-fast lint

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: pip then takes the CPU build, never the CUDA packages.
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

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
