# Two commands set everything up on a fresh machine with Python 3.11 and pip:
#   make demo   - venv, install, ingest data/sample/ through the Prefect flow, print the summary
#   make test   - venv, install, the whole test suite (with the wheel check)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_LAKE ?= data/lake

.PHONY: demo test wheel-check lint bench bench-targets bench-formats bench-marts bench-derived bench-live bench-stagger bench-scale clean install system-deps model

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo "setting up $(VENV): ckptwatch and its pinned dependencies (about a minute on a fresh machine)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24,<27"
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev,notebooks,dask]"
	touch $(STAMP)

# The CLI sets Prefect up itself (home in ~/.cache/ckptwatch/prefect unless PREFECT_HOME is
# set, telemetry off, warnings only; --verbose for Prefect's log).
demo: $(STAMP)
	$(BIN)/ckptwatch demo --raw data/sample --lake $(DEMO_LAKE)

# Debian packages the tests use for real: Alertmanager (the alert sink test) and Prometheus
# with promtool (the rules' unit tests, the metrics check and the scrape test of the watcher's
# metrics). One apt-get for whichever is missing, when running as root (CI, fresh machines);
# elsewhere the Alertmanager tests are skipped and the Prometheus tests fail saying to run this.
system-deps:
	@missing=""; \
	command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 \
		|| missing="$$missing prometheus-alertmanager"; \
	{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } \
		|| missing="$$missing prometheus"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's$$missing for the alert sink and Prometheus tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
		|| echo "warning: could not install$$missing; the tests that need it will say so"; \
	else echo "note:$$missing not installed (not root); the tests that need it will say so"; fi

# The whole suite, tests/test_wheel.py (the wheel check below) included, on two workers
# (pytest-xdist; a test file stays on one worker, so its session fixtures are built once).
test: $(STAMP) system-deps
	PREFECT_HOME=$(CURDIR)/.prefect $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# The wheel on its own (tests/test_wheel.py): the sdist built from the checkout and the wheel
# from the sdist (compared file for file with the build's tree), installed with --no-deps into
# a fresh venv whose declared dependencies ([notebooks] extra included) are linked from the dev
# venv at the pins of constraints.txt (pip check), then simulate, ingest, nightly, stalls,
# explain, alerts, latency, sql, postmortem, plan, train-model, evaluate and demo run from a
# temporary directory outside the checkout (HOME and PREFECT_HOME there too; demo,
# train-model, evaluate and plan alongside the others).
wheel-check: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_wheel.py

# The attribution model (not committed): trained on simulated scenarios, seeds 1000-1029.
model: $(STAMP)
	$(BIN)/ckptwatch train-model --seeds 1000-1029

lint: $(STAMP)
	$(BIN)/ruff check src tests pipelines bench
	$(BIN)/mypy

# The benchmarks (not part of the tests), then issue 18's targets in one table
# (bench/targets.py: each figure, held or by how much it misses, and why). The 512-node
# cluster-day in the world format mix (every supported format, bench/generate_day.py) is
# generated once; then the per-format ingest ratios (bench-formats below), every stage of the
# day (rows, s, rows/s, CPU s, peak RSS, the same-run reference per stage), checkpoint_latency
# against the same columns by hand, and the start-up times on the sample lake. About an hour.
# A step that misses its target still lets the others run; the table says what each found.
bench: $(STAMP)
	@test -d bench/out/raw-512n-24h-world || $(BIN)/python bench/generate_day.py
	-$(BIN)/python bench/formats.py
	-$(BIN)/python bench/run.py --raw bench/out/raw-512n-24h-world
	-$(BIN)/python bench/bench_marts.py --markers
	@test -d $(DEMO_LAKE) || $(BIN)/ckptwatch demo --raw data/sample --lake $(DEMO_LAKE) >/dev/null
	-$(BIN)/python bench/bench_marts.py --startup --lake $(DEMO_LAKE)
	$(BIN)/python bench/targets.py

# The table of the last figures alone (bench/out/*.json), without running anything.
bench-targets: $(STAMP)
	$(BIN)/python bench/targets.py

# Every format's ingest against bare polars and bare json.loads of the same bytes, and the
# whole mixed day (64 nodes, 8 h; generated once into bench/out/raw-64n-8h-world); each pool
# format (Lustre, DAOS, SPDK, GPFS tools' output, a day of its own in bench/out/raw-64n-8h-pool-*)
# also against a hand-written polars pipeline to the same rows (bench/pool_hand.py): a few minutes.
bench-formats: $(STAMP)
	$(BIN)/python bench/formats.py

# The stagger plan applied back to the simulator (bench/stagger_loop.py): per seed, a day of
# colliding pool jobs, its plan, the same day with the plan's delays; ~10 s per seed.
bench-stagger: $(STAMP)
	$(BIN)/python bench/stagger_loop.py

bench-marts: $(STAMP)
	$(BIN)/python bench/bench_marts.py

# The derived counter deltas' refresh beside one bare lag() pass over the same lake's counter
# tables, each in a fresh process at the nightly's DuckDB cap (bench/out/work/lake by default).
bench-derived: $(STAMP)
	$(BIN)/python bench/derived.py

# The nightly's cost curve (issue 47; bench/scale.py): world-mix days of 128, 512 and 2,048
# nodes (generated once into bench/out/raw-*n-24h-world; SCALE_SIZES=128,512 for fewer), each's
# nightly flow at its default DuckDB cap on a fresh lake, beside a bare lag() pass and
# find_stalls alone on it: rows, wall and CPU s, peak RSS per step, the growth exponent and the
# targets (bench/out/scale.json). 128 and 512 nodes: ~7 min once their days exist (generating
# them: ~1 and ~3 min); the 2,048-node day is ~4x the 512-node one (~18 GB of raw files) and
# its run at least 4x as long. `bench/scale.py --table`: the last run's table, running nothing.
SCALE_SIZES ?= 128,512,2048
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py --sizes $(SCALE_SIZES)

# The live watcher benchmark (not part of the tests): ~8 min in real time. Replays a 512-node,
# 4096-rank job whose checkpoints hang; prints alert delay, the watcher's CPU and peak RSS.
bench-live: $(STAMP)
	$(BIN)/python bench/live.py

clean:
	rm -rf $(VENV) .prefect data/lake .pytest_cache
