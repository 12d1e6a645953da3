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

.DEFAULT_GOAL := help
.PHONY: help setup book test test-unit test-notebooks test-book lab serve execute bench clean

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

test: test-unit test-notebooks test-book ## Run the whole suite (unit, notebooks, strict build)
	@echo "make test: all checks passed"

test-unit: $(STAMP) ## Unit, property and notebook-hygiene tests
	$(BIN)/pytest tests

test-notebooks: $(STAMP) ## Re-execute every chapter with nbval and compare outputs
	$(BIN)/pytest $(NBVAL) chapters

test-book: $(STAMP) ## Build the site from a clean _build with warnings as errors
	rm -rf _build
	$(BIN)/jupyter-book build . $(JB_STRICT)

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
