# `make run` and `make test` do all set-up themselves on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
# The checkout on sys.path (a .pth entry), not an import hook: a folder named `poet` on
# PYTHONPATH (a clone's own folder) then cannot shadow the package as an empty namespace.
EDITABLE := --config-settings editable_mode=compat
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint docs install clean

# What a run needs: the package and its dependencies, no extras.
$(RUN_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned: an unpinned resolve would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet -c constraints.txt torch
	$(BIN)/pip install --quiet -c constraints.txt -e . $(EDITABLE)
	touch $(RUN_STAMP)

# Everything the tests, benchmarks, viewers and docs use.
$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,bench,logging,viewers,study,docs]' $(EDITABLE)
	touch $(STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/poet run experiments/quickstart.yaml

# Lint and format check (settings in pyproject.toml); `ruff format .` fixes the format.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The documentation site into site/ (git-ignored); --strict fails on any warning: a broken
# link, an API page that does not render, a generated table whose source is missing.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Two test processes (pytest-xdist), a file's tests in one of them (its fixtures built once);
# the docs test reads the site `docs` has just built instead of building it again.
test: lint docs
	POET_BUILT_SITE=$(CURDIR)/site $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=20

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) runs .pytest_cache site
