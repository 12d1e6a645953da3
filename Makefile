# Attention, Step by Step. `make book` builds the site, `make test` runs every check.
# Every target sets up .venv first, so a fresh clone needs nothing installed by hand.

SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg
# pytest-xdist workers for the unit tests (work-stealing: a few slow tests would
# otherwise leave one core idle at the end), the notebooks and the browser tests
# (CI's machines have two cores; WORKERS=0 runs everything in one process).
WORKERS ?= 2
XDIST := -n $(WORKERS)
JB_STRICT := -W -n --keep-going
PORT ?= 8000
# Debian's Chromium drives the browser tests, `make pdf` and `make screenshot`.
CHROMIUM := $(firstword $(wildcard /usr/bin/chromium) $(shell command -v chromium 2>/dev/null))
# The browser tests need neither the unit tests' conftest (torch) nor nbval.
BROWSER_PYTEST := --confcutdir=tests/browser -p no:nbval
# Nor does the rendered-HTML check, which reads the pages the strict build wrote.
RENDERED_PYTEST := --confcutdir=tests/rendered -p no:nbval

.DEFAULT_GOAL := help
.PHONY: help setup book test test-fast test-adverse lint format pre-commit pre-commit-install test-unit test-notebooks test-book test-book-and-sample test-browser pdf screenshot lab serve execute bench bench-attention clean

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

# The last line gives each phase's wall time, to read against the budgets
# (CONTRIBUTING.md: 300 s in all, 120 s for the browser tests, on two cores).
test: $(STAMP) ## Run the whole suite (lint, unit, notebooks, strict build, mutation sample, browser)
	@started=$$(date +%s); took=""; \
	phase() { local start=$$(date +%s); $(MAKE) --no-print-directory "$$1" || exit 1; \
	  took="$$took, $$1 $$(( $$(date +%s) - start )) s"; }; \
	phase lint; phase test-unit; phase test-notebooks; phase test-book-and-sample; \
	if [ -n "$(CHROMIUM)" ]; then phase test-browser; \
	elif [ -n "$$BOOK_REQUIRE_BROWSER" ]; then \
	  echo "Browser tests: no Chromium, and BOOK_REQUIRE_BROWSER is set (apt-get install -y chromium)"; exit 1; \
	else echo "Browser tests skipped: no Chromium here (apt-get install -y chromium, then make test-browser)"; fi; \
	echo "make test: all checks passed in $$(( $$(date +%s) - started )) s ($${took#, })"

test-fast: lint test-unit ## The quick loop: lint and the unit tests (not the notebooks, the build or the browser); CI runs make test

lint: $(STAMP) ## ruff: lint src, tests, scripts and the notebooks; check formatting
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP) ## ruff: apply safe fixes and format src, tests and scripts
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

pre-commit: $(STAMP) ## Run every pre-commit hook on every file
	$(BIN)/pre-commit run --all-files

pre-commit-install: $(STAMP) ## Install the pre-commit hooks into .git/hooks
	$(BIN)/pre-commit install

test-unit: $(STAMP) ## Unit, property and notebook-hygiene tests, and every docstring example
	$(BIN)/pytest $(XDIST) --dist worksteal --doctest-modules tests src --ignore=tests/browser --ignore=tests/rendered

test-notebooks: $(STAMP) ## Re-execute every chapter with nbval and compare outputs
	$(BIN)/pytest $(NBVAL) $(XDIST) --dist loadfile chapters

# Not part of make test (it takes minutes): run it after any change to a cell that measures.
test-adverse: $(STAMP) ## nbval over every chapter on one thread and one core, on a busy machine, with baseline CPU kernels
	$(PY) scripts/adverse.py one-thread -- $(BIN)/pytest $(NBVAL) chapters
	$(PY) scripts/adverse.py busy baseline -- $(BIN)/pytest $(NBVAL) $(XDIST) --dist loadfile chapters

test-book: $(STAMP) ## Build the site from a clean _build with warnings as errors; no raw MyST on its pages
	rm -rf _build
	$(BIN)/jupyter-book build . $(JB_STRICT)
	$(BIN)/pytest tests/rendered $(RENDERED_PYTEST)

# The strict build keeps one core busy; the mutation sample's two workers share
# the other, so the two together take less time than one after the other. The
# sample's report is printed after the build's, whole.
test-book-and-sample: $(STAMP) ## test-book and test-mutate-sample side by side (make test runs this)
	@sample_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-mutate-sample >"$$sample_log" 2>&1 & sample_pid=$$!; \
	$(MAKE) --no-print-directory test-book; book=$$?; \
	wait $$sample_pid; sample=$$?; \
	echo "--- make test-mutate-sample (ran beside the build)"; cat "$$sample_log"; rm -f "$$sample_log"; \
	if [ $$book -ne 0 ]; then echo "make test-book failed"; fi; \
	if [ $$sample -ne 0 ]; then echo "make test-mutate-sample failed"; fi; \
	[ $$book -eq 0 ] && [ $$sample -eq 0 ]

test-browser: $(STAMP) ## Chromium on every page of _build/html: offline, math, images, search, axe
	@test -f _build/html/index.html || { echo "No site yet: run 'make book' first"; exit 1; }
	$(BIN)/pytest tests/browser $(BROWSER_PYTEST) $(XDIST)

pdf: $(STAMP) ## Print the whole book to one PDF with Chromium: _build/pdf/book.pdf
	$(BIN)/jupyter-book build . --builder singlehtml
	$(PY) scripts/site.py pdf

screenshot: book ## Save docs/screenshot.png and docs/screenshot-phone.png of chapter 1 (README.md)
	$(PY) scripts/site.py screenshot

# tests/browser/test_lab.py runs this very target (with LAB_DIR and LAB_ARGS set).
# scripts/lab_settings/overrides.json renders every cell at once (no windowing), so
# that jupyterlab-myst finds each glossary, citation and figure target (README).
LAB_DIR ?= chapters
lab: $(STAMP) ## Open JupyterLab on chapters/, MyST rendered (jupyterlab-myst)
	$(BIN)/jupyter lab --notebook-dir=$(LAB_DIR) --LabApp.app_settings_dir=$(CURDIR)/scripts/lab_settings $(LAB_ARGS)

serve: ## Serve the built site on 127.0.0.1
	@test -f _build/html/index.html || { echo "No site yet: run 'make book' first"; exit 1; }
	@echo "Serving on http://127.0.0.1:$(PORT)/"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

execute: $(STAMP) ## Re-execute notebooks in place (NB=chapters/xx.ipynb for one)
	$(PY) scripts/notebooks.py execute $(NB)

bench: $(STAMP) ## Print each notebook's execution time (a benchmark, not a test)
	$(PY) scripts/notebooks.py bench $(NB)

bench-attention: $(STAMP) ## Attention's time and memory against T: SDPA, naive, MHA, chunked (not a test)
	$(PY) scripts/bench_attention.py

# The mutation catalogue (tests/mutations/chNN.py, CONTRIBUTING.md): each entry
# breaks one claim in a scratch copy and the checks it names must catch it.
# CHAPTER=13 runs one chapter's entries, MUTATION=ch13:id one entry.
.PHONY: mutate test-mutate-sample mutate-package
MUTATE_ARGS := $(if $(CHAPTER),--chapter $(CHAPTER)) $(if $(MUTATION),--id $(MUTATION))
mutate: $(STAMP) ## Run the mutation catalogue: every catalogued claim broken must be caught (CHAPTER=NN, MUTATION=chNN:id)
	$(PY) scripts/mutate.py --workers $(WORKERS) $(MUTATE_ARGS)

test-mutate-sample: $(STAMP) ## The catalogue's sample: the one entry per chapter marked sample (make test runs it)
	$(PY) scripts/mutate.py --sample --workers $(WORKERS)

mutate-package: $(STAMP) ## mutmut over layers/, masks.py, kernels/ with their unit tests (TARGET=masks, MUTATE_SECONDS=600; docs/mutation-score.md)
	$(PY) scripts/mutate_package.py $(TARGET) $(if $(MUTATE_SECONDS),--max-seconds $(MUTATE_SECONDS))

clean: ## Remove the built site
	rm -rf _build
