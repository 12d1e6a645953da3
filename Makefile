# Attention, Step by Step. `make book` builds the site, `make test` runs every check.
# Every target sets up .venv first, so a fresh clone needs nothing installed by hand.

SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg
JB_STRICT := -W -n --keep-going
PORT ?= 8000
# Debian's Chromium drives the browser tests, `make pdf` and `make screenshot`.
CHROMIUM := $(firstword $(wildcard /usr/bin/chromium) $(shell command -v chromium 2>/dev/null))
# The browser tests need neither the unit tests' conftest (torch) nor nbval.
BROWSER_PYTEST := --confcutdir=tests/browser -p no:nbval

.DEFAULT_GOAL := help
.PHONY: help setup book test test-unit test-notebooks test-book test-browser pdf screenshot lab serve execute bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

setup: $(STAMP) ## Create .venv and install the pinned requirements

book: $(STAMP) ## Build the website into _build/html
	$(BIN)/jupyter-book build .
	@echo "The book is at $(CURDIR)/_build/html/index.html"

test: test-unit test-notebooks test-book ## Run the whole suite (unit, notebooks, strict build, browser)
	@if [ -n "$(CHROMIUM)" ]; then $(MAKE) --no-print-directory test-browser; \
	elif [ -n "$$BOOK_REQUIRE_BROWSER" ]; then \
	  echo "Browser tests: no Chromium, and BOOK_REQUIRE_BROWSER is set (apt-get install -y chromium)"; exit 1; \
	else echo "Browser tests skipped: no Chromium here (apt-get install -y chromium, then make test-browser)"; fi
	@echo "make test: all checks passed"

test-unit: $(STAMP) ## Unit, property and notebook-hygiene tests
	$(BIN)/pytest tests --ignore=tests/browser

test-notebooks: $(STAMP) ## Re-execute every chapter with nbval and compare outputs
	$(BIN)/pytest $(NBVAL) chapters

test-book: $(STAMP) ## Build the site from a clean _build with warnings as errors
	rm -rf _build
	$(BIN)/jupyter-book build . $(JB_STRICT)

test-browser: $(STAMP) ## Chromium on every page of _build/html: offline, math, images, search, axe
	@test -f _build/html/index.html || { echo "No site yet: run 'make book' first"; exit 1; }
	$(BIN)/pytest tests/browser $(BROWSER_PYTEST)

pdf: $(STAMP) ## Print the whole book to one PDF with Chromium: _build/pdf/book.pdf
	$(BIN)/jupyter-book build . --builder singlehtml
	$(PY) scripts/site.py pdf

screenshot: book ## Save docs/screenshot.png of chapter 1 (shown in README.md)
	$(PY) scripts/site.py screenshot

lab: $(STAMP) ## Open JupyterLab on chapters/
	$(BIN)/jupyter lab --notebook-dir=chapters

serve: ## Serve the built site on 127.0.0.1
	@test -f _build/html/index.html || { echo "No site yet: run 'make book' first"; exit 1; }
	@echo "Serving on http://127.0.0.1:$(PORT)/"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

execute: $(STAMP) ## Re-execute notebooks in place (NB=chapters/xx.ipynb for one)
	$(PY) scripts/notebooks.py execute $(NB)

bench: $(STAMP) ## Print each notebook's execution time (a benchmark, not a test)
	$(PY) scripts/notebooks.py bench $(NB)

clean: ## Remove the built site
	rm -rf _build
