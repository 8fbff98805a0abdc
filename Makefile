# shardstream developer entry points. Everything installs into .venv from this repo's own files.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-peers fuzz venv clean

$(STAMP): pyproject.toml setup.py Makefile src/shardstream/tar/_scan.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[torch,test]"
	touch $(STAMP)

venv: $(STAMP)

## the main job: build shards from an embedded dataset and train from them
demo: $(STAMP)
	$(PY) -m shardstream.demo

## the whole test suite (installs the real test servers it needs: nginx, Ceph RadosGW, chromium; see scripts/)
test: $(STAMP)
	./scripts/install-test-servers.sh
	$(PY) -m pytest -q tests

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
	.venv-bench/bin/python -m pip install -q "torch==2.13.0"
	.venv-bench/bin/python -m pip install -q -e ".[torch,bench,zstd,s3]"
	.venv-bench/bin/python benchmarks/run_all.py

## issue-7 peers side by side (litdata, DALI on CPU, FFCV where it builds), each in its own venv
bench-peers: $(STAMP)
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q "torch==2.13.0"
	.venv-bench/bin/python -m pip install -q -e ".[torch,bench,zstd,s3]"
	PYTHON=$(PYTHON) benchmarks/peers/setup.sh
	.venv-bench/bin/python benchmarks/peers/bench_peers.py

clean:
	rm -rf $(VENV) .venv-bench .venv-peers-* build src/*.egg-info
