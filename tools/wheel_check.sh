#!/usr/bin/env bash
# The package as pip installs it (CI's wheel stage, run by .ci/run after `make setup`):
#
#   bash tools/wheel_check.sh
#
# 1. builds the sdist, and the wheel from the sdist (`python -m build`), and a second wheel straight from the working
#    tree: both wheels must hold the same files with the same bytes (the sdist builds the wheel the tree builds);
# 2. installs that wheel, not editable, with its declared dependencies, into a fresh virtual environment (no access
#    to the checkout's .venv); pip resolves everything but torch, which comes first as the CPU build a CPU user
#    installs (the local wheel in $RLCE_WHEELS, default /opt/wheels, else PyTorch's CPU index), then `pip check`;
# 3. from a folder outside the checkout: `rlce-trl --version`, every subcommand's `--help`, `rlce-trl recipes`
#    (every shipped recipe listed, read and parsed by its script's parser), the quickstart recipe for 1 step with a
#    tiny local model in place of SmolLM2, `rlce-trl evaluate` on the bundled preference sample, and `rlce-trl env`.
#
# Needs `build` (the `test` extra has it) in $PYTHON (default .venv/bin/python, which also builds the tiny model with
# tests/testing_utils.py). Prints the seconds each part took. KEEP=1 keeps the work folder.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
BASE_PYTHON="$("$PY" -c 'import sys; print(sys._base_executable)')"
WHEELS="${RLCE_WHEELS:-/opt/wheels}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/rlce-wheel-check.XXXXXX")"
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 PIP_DISABLE_PIP_VERSION_CHECK=1
start=$SECONDS
lap() { echo "wheel-check: $1 ($((SECONDS - start)) s so far)"; }
fail() { echo "wheel-check FAILED: $*" >&2; exit 1; }

# 1. sdist -> wheel, and the tree -> wheel, both from one copy of the tree's files (tracked and not ignored: what a
#    clean clone plus your edits holds), so that no stale build/ folder or egg-info of the checkout counts
mkdir -p "$WORK/tree"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$WORK/tree"
"$PY" -m build --no-isolation --outdir "$WORK/dist" "$WORK/tree" >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log"; fail "build"; }
"$PY" -m build --wheel --no-isolation --outdir "$WORK/direct" "$WORK/tree" >>"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log"; fail "build from the tree"; }
WHEEL="$(ls "$WORK"/dist/*.whl)"
"$PY" - "$WHEEL" "$WORK"/direct/*.whl <<'EOF' || fail "the sdist's wheel differs from the tree's"
import hashlib, sys, zipfile
def files(path):
    with zipfile.ZipFile(path) as wheel:
        return {n: hashlib.sha256(wheel.read(n)).hexdigest() for n in wheel.namelist() if not n.endswith("/RECORD")}
a, b = files(sys.argv[1]), files(sys.argv[2])
if a != b:
    print("only from the sdist:", sorted(set(a) - set(b)), "only from the tree:", sorted(set(b) - set(a)),
          "different bytes:", sorted(n for n in set(a) & set(b) if a[n] != b[n]), file=sys.stderr)
    sys.exit(1)
print(f"wheel-check: the sdist and the tree build the same wheel ({len(a)} files)")
EOF
lap "built $(basename "$WHEEL") and $(basename "$(ls "$WORK"/dist/*.tar.gz)")"

# 2. a fresh environment with the wheel and its declared dependencies
"$BASE_PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
TORCH_WHEEL="$(ls "$WHEELS"/torch-*+cpu-*.whl 2>/dev/null | head -1 || true)"
# --no-compile: pip writes no .pyc files for the installed packages (torch alone has thousands); Python writes the ones
# it needs at the first import
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; return "${PIPESTATUS[0]}"; }  # pip's index notes
if [[ -n "$TORCH_WHEEL" ]]; then
    quiet "$VPY" -m pip install -q --no-compile "$TORCH_WHEEL" || fail "installing $TORCH_WHEEL"
else
    quiet "$VPY" -m pip install -q --no-compile torch --index-url "$TORCH_CPU_INDEX" || fail "installing torch"
fi
lap "fresh venv with torch $("$VPY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
quiet "$VPY" -m pip install -q --no-compile "$WHEEL" || fail "pip install $(basename "$WHEEL")"
"$VPY" -m pip show -q rlce-trl >/dev/null || fail "the wheel did not install"
"$VPY" -m pip check || fail "pip check"
"$VPY" -c "import rlce_trl, sys; sys.exit('site-packages' not in rlce_trl.__file__)" \
    || fail "rlce_trl is not imported from the installed wheel"
lap "installed into a fresh venv"

# 3. as a user runs it: from a folder outside the checkout
RUN="$WORK/run"
mkdir -p "$RUN"
cd "$RUN"
CLI="$WORK/venv/bin/rlce-trl"
VERSION="$("$PY" -c 'import tomllib, sys; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
    "$ROOT/pyproject.toml")"
[[ "$("$CLI" --version)" == "rlce-trl $VERSION" ]] || fail "rlce-trl --version: $("$CLI" --version)"
COMMANDS="$("$VPY" -c 'from rlce_trl.cli import build_parser
print(" ".join(next(a for a in build_parser()._actions if a.dest == "command").choices))')"
for command in $COMMANDS; do
    "$CLI" "$command" --help >"$WORK/help.txt" 2>&1 || { cat "$WORK/help.txt"; fail "rlce-trl $command --help"; }
done
lap "rlce-trl --version and --help of: $COMMANDS"

"$CLI" recipes >"$WORK/recipes.txt"
SHIPPED="$(ls "$ROOT"/configs/*.yaml | wc -l)"
LISTED="$(grep -c '^[a-z][a-z0-9_]* ' "$WORK/recipes.txt" || true)"
[[ "$LISTED" == "$SHIPPED" ]] || { cat "$WORK/recipes.txt"; fail "rlce-trl recipes lists $LISTED of $SHIPPED recipes"; }
"$VPY" - <<'EOF' || fail "a shipped recipe does not parse from the wheel"
import torch
from rlce_trl.training.recipes import list_recipes, load_recipe

for path in list_recipes():
    recipe = load_recipe(path)
    if recipe.kind == "coevolve":
        from rlce_trl.coevolution import phase as script
    else:
        import importlib
        script = importlib.import_module(recipe.module())
    argv = ["--config", str(path)]
    if recipe.values.get("bf16") and not torch.cuda.is_available():
        argv += ["--bf16", "false"]  # transformers refuses bf16 without an accelerator; everything else as written
    script.make_parser().parse_args_and_config(argv)
print(f"wheel-check: {len(list_recipes())} recipes parsed")
EOF
lap "rlce-trl recipes: $SHIPPED listed and parsed"

(cd "$ROOT/tests" && "$PY" -c 'import sys; from testing_utils import build_tiny_model; build_tiny_model(sys.argv[1])' \
    "$WORK/tiny")
"$CLI" train --config quickstart --model_name_or_path "$WORK/tiny" --max_steps 1 --save_steps 1 \
    --output_dir "$RUN/quickstart" >"$WORK/train.log" 2>&1 || { tail -40 "$WORK/train.log"; fail "quickstart"; }
ls "$RUN"/quickstart/checkpoint-1/model.safetensors >/dev/null || { tail -40 "$WORK/train.log"; fail "no checkpoint"; }
lap "rlce-trl train --config quickstart: 1 step, checkpoint written"

"$CLI" evaluate --model_name_or_path "$WORK/tiny" --data sample --limit 2 --max_new_tokens 4 --dtype float32 \
    --output_dir "$RUN/eval" >"$WORK/eval.log" 2>&1 || { tail -20 "$WORK/eval.log"; fail "evaluate on the sample"; }
[[ "$(wc -l <"$RUN/eval/predictions.jsonl")" == 2 ]] || fail "evaluate wrote no 2 predictions"
lap "rlce-trl evaluate --data sample: 2 predictions"

if [[ " $COMMANDS " == *" env "* ]]; then
    "$CLI" env >"$WORK/env.txt" || fail "rlce-trl env"
    grep -q "^- rlce-trl version: $VERSION" "$WORK/env.txt" || { cat "$WORK/env.txt"; fail "rlce-trl env"; }
fi
echo "wheel-check: passed in $((SECONDS - start)) s"
