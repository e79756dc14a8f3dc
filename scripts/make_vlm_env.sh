#!/usr/bin/env bash
# Build the virtual environment of the `vlm`-marked tests: a vision-language model and its video processor, which in
# transformers need torchvision.
#
#   bash scripts/make_vlm_env.sh             # creates <repo>/.venv-vlm (or $VLM_VENV)
#
# Why a venv of its own: the torch wheel of the main venv (2.13.0, CPU build) has no torchvision that loads beside it
# (`operator torchvision::nms does not exist`, platform notes), so this one takes a torch / torchvision pair that
# match (on this machine both lie on disk; elsewhere pip downloads them). Idempotent: returns at once when ready.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLM_VENV:-$ROOT/.venv-vlm}"
TORCH_SPEC="${VLM_TORCH_SPEC:-torch==2.14.1 torchvision==0.29.1}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.rlce-vlm-env"
WANT="$TORCH_SPEC $(sha1sum "$ROOT/pyproject.toml" | cut -c1-12)"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    echo "vlm env ready: $VENV ($TORCH_SPEC)"
    exit 0
fi

echo "building vlm env in $VENV ($TORCH_SPEC)"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# (pip may print "Location ... is ignored" warnings for local indexes configured on the machine: harmless)
"${PIP[@]}" install --upgrade pip >/dev/null
# shellcheck disable=SC2086  # TORCH_SPEC is a list of requirements
"${PIP[@]}" install $TORCH_SPEC
"${PIP[@]}" install -e "$ROOT[video,test]"
"$VENV/bin/python" -c "import torch, torchvision, transformers, rlce_trl; from transformers import Qwen3VLVideoProcessor
print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
echo "$WANT" > "$STAMP"
