"""The RLCE part of the model card that `RLCEGRPOTrainer.create_model_card` writes next to TRL's.

TRL's card (`trl/templates/lm_model_card.md`) names the base model, the trainer and TRL's versions. This module adds
one section: the method (RLCE, with the paper), the frozen verifier (model and backend), the RLCE reward settings, the
dataset and the recipe. Nothing secret gets in: settings whose name says token / key / secret / password / header are
left out, URLs lose their user-info and query string, local paths are reduced to their last component, and the whole
card is scrubbed the same way before it is written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BEGIN, END = "<!-- rlce-trl:begin -->", "<!-- rlce-trl:end -->"
PAPER_TITLE = "Reinforcement Learning with Comparative Evidence for Social Intelligence"
SECRET_NAME = re.compile(r"token|key|secret|passw|header|auth|credential|cookie", re.IGNORECASE)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)\]>'\"`|]+")
# A query parameter that looks like a credential, anywhere in the text.
_SECRET_PARAM = re.compile(r"([?&](?:[\w.-]*(?:token|key|secret|signature|sig|password|auth)[\w.-]*)=)[^&\s)\]'\"`|]+",
                           re.IGNORECASE)
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{10,}\b")
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def clean_url(url: str) -> str:
    """`url` without user-info (`user:password@`), query string and fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def redact(text: str) -> str:
    """Scrub credentials from free text: URLs with user-info or credential-like query parameters, Hub tokens,
    bearer tokens."""
    text = _SECRET_PARAM.sub(r"\1<redacted>", text)
    text = _URL.sub(lambda m: clean_url(m.group(0)) if ("@" in m.group(0) or "<redacted>" in m.group(0))
                    else m.group(0), text)
    text = _HF_TOKEN.sub("<redacted>", text)
    return _BEARER.sub(r"\1<redacted>", text)


def describe_model(name_or_path: str | None) -> str:
    """A Hub id as it is, a URL without credentials, a local folder by its name only."""
    if not name_or_path:
        return "unknown"
    name = str(name_or_path)
    if "://" in name:
        return f"`{clean_url(name)}`"
    if os.path.isabs(name) or name.startswith((".", "~")) or os.path.isdir(name):
        return f"local folder `{Path(name).name}`"
    return f"[{name}](https://huggingface.co/{name})"


def public_settings(args, prefixes=("verifier_", "rlce_")) -> dict[str, object]:
    """The `verifier_*` and `rlce_*` fields of `args`, without anything that could be a secret."""
    import dataclasses

    names = ([f.name for f in dataclasses.fields(args)] if dataclasses.is_dataclass(args)
             else [n for n in dir(args) if not n.startswith("_")])
    out = {}
    for name in sorted(names):
        if not name.startswith(prefixes) or SECRET_NAME.search(name):
            continue
        value = getattr(args, name)
        if isinstance(value, str):
            value = clean_url(value) if "://" in value else value
        elif isinstance(value, (list, tuple)):
            value = [clean_url(v) if isinstance(v, str) and "://" in v else v for v in value]
        elif isinstance(value, dict):
            value = "{...}"  # e.g. request headers or client options: never printed
        out[name] = value
    return out


def verifier_source(trainer) -> str:
    """Which model serves as the frozen verifier."""
    args = trainer.args
    if args.verifier_model_name_or_path:
        return describe_model(args.verifier_model_name_or_path)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    base = getattr(getattr(policy, "config", None), "_name_or_path", None)
    if hasattr(policy, "peft_config"):
        return f"the base model ({describe_model(base)}) with the LoRA adapter disabled"
    return f"a frozen copy of the initial checkpoint ({describe_model(base)})"


def rlce_section(trainer, dataset_name: str | None = None) -> str:
    """The markdown section (between markers) for `trainer`, an `RLCEGRPOTrainer`."""
    args = trainer.args
    info = dict(getattr(trainer, "rlce_card_info", None) or {})
    dataset = dataset_name or info.get("dataset") or "not recorded"
    recipe = info.get("recipe")
    policy = trainer.accelerator.unwrap_model(trainer.model)
    training = "LoRA (PEFT) adapter" if hasattr(policy, "peft_config") else "full fine-tuning"
    rows = [
        ("Method", f"RLCE (Reinforcement Learning with Comparative Evidence), {args.rlce_mode} tests, on GRPO"),
        ("Verifier model", verifier_source(trainer)),
        ("Verifier mode", f"`{args.verifier_mode}`"),
        ("Reward", f"{args.rlce_verified_weight} x verified answer + {args.rlce_format_weight} x `\\boxed{{}}` format"),
        ("Tests per direction", str(args.rlce_tests_per_direction)),
        ("Dataset", dataset),
        ("Recipe", f"`{os.path.basename(recipe)}`" if recipe else "none (arguments given in code)"),
        ("Training", (f"{training}; G={args.num_generations}, lr={args.learning_rate}, beta={args.beta}, "
                      f"steps={trainer.state.global_step}")),
        ("Paper", f"*{PAPER_TITLE}*"),
    ]
    if info.get("adaptation"):  # test-time adaptation (rlce_trl.scripts.tta): which split
        rows.insert(6, ("Adaptation", info["adaptation"]))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    settings = "\n".join(f"- `{k}`: `{v}`" for k, v in public_settings(args).items())
    text = f"""{BEGIN}
## RLCE

This model was trained with **RLCE** (Reinforcement Learning with Comparative Evidence, *{PAPER_TITLE}*) through
[rlce-trl](https://github.com/rlce-trl/rlce-trl)'s `RLCEGRPOTrainer`: a frozen verifier builds and validates
comparative evidence tests between the distinct answers of each rollout group, and the answer with the best evidence
is rewarded. No gold labels are used.

| | |
|---|---|
{table}

<details><summary>Verifier and RLCE settings</summary>

{settings}

</details>
{END}
"""
    return redact(text)


def add_rlce_section(trainer, readme_path: str | os.PathLike, dataset_name: str | None = None) -> None:
    """Insert (or replace) the RLCE section in the card at `readme_path`, before TRL's "Framework versions", and
    scrub the whole card. Does nothing when there is no card."""
    path = Path(readme_path)
    if not path.exists():
        return
    card = path.read_text(encoding="utf-8")
    if BEGIN in card and END in card:
        card = card[: card.index(BEGIN)] + card[card.index(END) + len(END) :].lstrip("\n")
    section = rlce_section(trainer, dataset_name)
    anchor = "### Framework versions"
    card = card.replace(anchor, section + "\n" + anchor, 1) if anchor in card else card.rstrip() + "\n\n" + section
    path.write_text(redact(card), encoding="utf-8")
