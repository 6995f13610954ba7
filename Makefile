# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs (the CPU build of torch first).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck strict-count docs notebooks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[torch,dev,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/empirical-batch demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# the notebooks run once: tests/test_notebooks.py leaves the executed copies here and
# the docs build publishes them (docs/_ext/notebooks_hook.py)
NB_DONE := $(abspath $(VENV))/executed-notebooks

typecheck: $(STAMP)
	$(PY) -m mypy

# the mypy --strict errors left in the package, per module (pyproject.toml lists the
# modules `typecheck` already holds to --strict's checks)
strict-count: $(STAMP)
	$(PY) tools/strict_count.py

test: lint typecheck $(STAMP)
	rm -rf $(NB_DONE)
	# tests that start process groups or clusters (DDP, FSDP, Dask, Ray) share an
	# xdist_group and run one at a time: run side by side, gloo workers aborted now and then
	EMPIRICAL_BATCH_EXECUTED_NOTEBOOKS=$(NB_DONE) $(PY) -m pytest -n 2 --dist loadgroup
	EMPIRICAL_BATCH_EXECUTED_NOTEBOOKS=$(NB_DONE) $(MAKE) docs
	# the built site in headless Chromium (skips, saying why, where Chromium is absent)
	EMPIRICAL_BATCH_SITE=$(abspath $(VENV))/site $(PY) -m pytest -q -p no:cacheprovider tests/test_docs_browser.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(VENV)/site

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site
