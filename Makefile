# shardstream developer entry points. Everything installs into .venv from this repo's own files.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
# The dev setup pins torch (CPU); the package itself asks only for a range (pyproject's `torch` extra).
TORCH  := torch==2.13.0
WEBDATASET := webdataset==1.0.2
# the trainers tests/integrations runs (pyproject's `test` extra asks for ranges)
TRAINERS := accelerate==1.15.0 transformers==5.24.0 lightning==2.6.6

.PHONY: demo test lint docs test-pythons bench bench-peers bench-convert fuzz venv clean

$(STAMP): pyproject.toml setup.py Makefile $(wildcard src/shardstream/_native/_scan*.c src/shardstream/_native/_scan*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e ".[torch,test]" $(TRAINERS)
	$(PIP) install -q "$(WEBDATASET)"  # tests/compat compares with exactly this version
	touch $(STAMP)

venv: $(STAMP)

## the main job: build shards from an embedded dataset and train from them
demo: $(STAMP)
	$(PY) -m shardstream.demo

## the whole test suite (installs the real test servers it needs: nginx, Ceph RadosGW, chromium, Azurite; see scripts/)
test: $(STAMP)
	./scripts/install-test-servers.sh
	$(PY) -m pytest -q --durations=20 tests

## the linters over src/ ([tool.ruff], [tool.mypy] in pyproject.toml; tests/test_lint.py runs them)
lint: $(STAMP)
	$(VENV)/bin/ruff check src
	$(PY) -m mypy

## the documentation site (mkdocs.yml) into site/, warnings as errors; `$(PY) -m mkdocs serve` to browse it
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

## the core test suite (no torch, no servers) under each CPython 3.10-3.13: pyenv's builds when they exist
## (`pyenv install` builds a missing one: minutes each), one .venv-py3.X per version with the package
## installed from a wheel (not editable: the tests import the installed copy, src/ is not on the path)
PYTHONS    ?= 3.10 3.11 3.12 3.13
CORE_TESTS ?= tests/tar tests/codecs tests/pipeline tests/indexed tests/test_samples.py tests/test_writer.py \
              tests/test_config.py tests/test_errors.py tests/test_no_torch.py tests/test_layers.py tests/test_logging.py
test-pythons:
	set -e; unset PYTHONPATH; for v in $(PYTHONS); do \
	  py=$$(scripts/find-python.sh $$v); \
	  echo "== Python $$v: $$py"; \
	  test -x .venv-py$$v/bin/python || $$py -m venv .venv-py$$v; \
	  .venv-py$$v/bin/python -m pip install -q ".[test-core]"; \
	  .venv-py$$v/bin/python -m pytest -q -p no:cacheprovider $(CORE_TESTS); \
	done

## fuzz the readers, decoders and index loaders for FUZZ_SECONDS (default 60): atheris (coverage-guided) where it
## installs, else the structure-aware mutator; findings are saved in fuzz/findings/ and fail the target
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(PIP) install -q "atheris>=2.3" || echo "atheris does not install here: using the structure-aware mutator"
	$(PY) fuzz/fuzz_shardstream.py --engine auto --seconds $(FUZZ_SECONDS)

## benchmarks side by side with webdataset (installs webdataset==1.0.2 into .venv-bench)
bench: $(STAMP)
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q --upgrade pip
	.venv-bench/bin/python -m pip install -q "$(TORCH)"
	.venv-bench/bin/python -m pip install -q -e ".[torch,bench,zstd,s3,jpeg]" "$(WEBDATASET)"  # jpeg: bench_pipeline.py's opt-in scaled rows
	.venv-bench/bin/python benchmarks/run_all.py

## issue-17 peers side by side (webdataset 1.0.2, litdata, DALI on CPU, FFCV 1.0.2, MosaicML Streaming), each in its
## own venv (benchmarks/peers/setup.sh; FFCV needs Debian's libopencv-dev libturbojpeg0-dev: apt-get installs them as
## root or with sudo). BENCH_PEERS_ARGS=--quick for a smoke run; the workers import src/, so the C walk is built there.
BENCH_PEERS_ARGS ?=
bench-peers:
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q --upgrade pip setuptools
	.venv-bench/bin/python -m pip install -q "$(TORCH)"
	.venv-bench/bin/python -m pip install -q -e ".[torch,bench,zstd,s3,jpeg]" "$(WEBDATASET)"  # jpeg: the scaled rows
	.venv-bench/bin/python setup.py -q build_ext --inplace
	PYTHON=$(PYTHON) benchmarks/peers/setup.sh  # litdata dali ffcv streaming
	.venv-bench/bin/python benchmarks/peers/bench_peers.py $(BENCH_PEERS_ARGS)

## issue-14 conversion benchmark: shardstream vs litdata, Streaming, webdataset (each peer in its own venv)
bench-convert: $(STAMP)
	PYTHON=$(PYTHON) benchmarks/peers/setup.sh litdata streaming webdataset
	$(PY) benchmarks/bench_convert.py

clean:
	rm -rf $(VENV) .venv-bench .venv-peers-* .venv-py3.* build dist site src/*.egg-info
