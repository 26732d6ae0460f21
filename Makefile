# `make run` and `make test` set up .venv on first use, then run the default ablation or the
# tests. `make train` runs the single Quickstart job; `make analyse` runs the analysis
# notebook on `make run`'s runs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run train analyse test test-live mutate lint format report report-small

# uv installs the requirements (parallel downloads: 37 s from empty caches where pip took
# 74 s on the 2-core machine); plain pip is the fallback where uv cannot be installed or run.
# Bytecode is compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (it is
# on our machines) every process would otherwise compile jax and flax from source again
# (about 200 CPU-s over the test suite's processes).
$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
		echo "make: needs Python >= 3.11 ($(PYTHON) is missing or older); e.g. make run PYTHON=python3.11" >&2; \
		exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv && $(VENV)/bin/uv pip install --quiet --compile-bytecode \
		--python $(PY) -r requirements.txt || $(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m experiments.ablate --config=configs/ablation_default.py --workdir=runs/ablation_default --parallel 2

train: $(STAMP)
	$(PY) -m omnilearn_jax.main --config=configs/quickstart.py --workdir=runs/quickstart

analyse: $(STAMP)
	@test -f runs/ablation_default/ablation.json || { \
		echo "make analyse: no runs/ablation_default yet; run 'make run' first" >&2; exit 2; }
	$(PY) -m experiments.notebooks.run_analysis --runs runs/ablation_default \
		--out runs/ablation_default/report

# JAX's persistent compilation cache (tests/conftest.py) lives in ~/.cache/omnilearn_jax/jax_cache;
# delete it for a cold run. The files run on TEST_WORKERS processes (pytest-xdist), one file
# at a time each, longest first (tests/conftest.py). Python may write bytecode here (into
# __pycache__, ignored by git) whatever PYTHONDONTWRITEBYTECODE says: the suite starts some 70
# Python processes, and each compiled the project's modules from source again (0.3 CPU-s a
# process, measured) and pytest rewrote every test module's asserts again in each worker.
TEST_WORKERS ?= 2
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not live"

# The tests that read the machine's real timing (marker `live`): one process, nothing else
# running beside them.
test-live: $(STAMP)
	$(PY) -m pytest -q -m live

# Mutation testing of controllers/ and omnilearn_jax/cluster/ (mutmut; pyproject.toml
# [tool.mutmut] names the tests); not part of `make test`. Results: docs/robustness.md.
$(VENV)/.installed-dev: requirements-dev.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# `make mutate MUTANTS='controllers.allocate*'` runs a subset; a rerun keeps earlier results
# (mutants/, delete it to start over).
mutate: $(VENV)/.installed-dev
	$(VENV)/bin/mutmut run $(MUTANTS)
	$(VENV)/bin/mutmut export-cicd-stats && cat mutants/mutmut-cicd-stats.json
	$(VENV)/bin/mutmut results

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

# Regenerates docs/RESULTS.md, docs/BENCHMARKS.md and their figures from fresh runs
# (runs/paper). The ablations took 26 min on 2 shared CPU cores (--parallel 2, 2026-12-01)
# before bsp_levels_curve joined them (12 min on a loaded machine, bsp_levels 9 min), and
# dynamic_curve, async_levels_curve and scaleout_curve took 8, 10.5 and 4 min more (--parallel 1,
# load 4-10): plan on 55-70 min, the benchmarks on top (runs/paper/timings.json keeps each
# part's latest time). Then it reruns the studies with generators of their own (the tuned
# async study, the held-out controller families, the predictive trainer runs: 10, 9 and 5
# min; the single held-out family, the async staleness table and the cost-curve simulation:
# 4, 0.5 and 1.5 min; the GPT under the formula and on its curve: 14 and 10.5 min; 2 shared
# cores, 2026-12-02; `--skip_study=...` keeps some as committed, `--only` names parts to run,
# and a rerun resumes the async runs, the trainer cells and the GPT cells). The quota study
# (experiments/real_hetero.py, the wall clock under root cgroups) is not rerun; RESULTS.md
# splices its committed document.
# report-small checks the pipeline in a temp dir (about 1 min; the studies' documents only).
report: $(STAMP)
	$(PY) -m experiments.paper.reproduce --workdir=runs/paper --parallel 2

report-small: $(STAMP)
	$(PY) -m experiments.paper.reproduce --small
