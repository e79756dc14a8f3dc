"""The RLCE part of the model card that `RLCEGRPOTrainer.create_model_card` writes next to TRL's.

TRL's card (`trl/templates/lm_model_card.md`) names the base model, the trainer and TRL's versions. This module adds
one section: the method (RLCE, with the paper), the frozen verifier (model and backend), the RLCE reward settings, the
dataset and the recipe. Nothing secret gets in: settings whose name says token / key / secret / password / header are
left out, URLs lose their user-info and query string, local paths are reduced to their last component, and the whole
card is scrubbed the same way before it is written.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

from .credentials import SECRET_NAME, clean_url
from .credentials import scrub as redact

BEGIN, END = "<!-- rlce-trl:begin -->", "<!-- rlce-trl:end -->"
SOURCE_FILE = "rlce_source.json"  # written into folders that rlce-trl builds from a Hub model (model aliases)
#: The paper: its title (the card's "Paper" row) and BibTeX entry (TRL's card, through `RLCEGRPOTrainer._paper`).
PAPER_TITLE = "Reinforcement Learning with Comparative Evidence for Social Intelligence"
# docstyle-ignore
PAPER_CITATION = textwrap.dedent(f"""\
    @article{{rlce2026,
        title        = {{{{{PAPER_TITLE}}}}},
        year         = 2026,
    }}""")


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


def base_model_id(name_or_path: str | None) -> str | None:
    """The Hub id of the model training started from: the name itself for a Hub id; for a local folder the id that
    rlce-trl recorded when it built the folder from a model alias (`rlce_source.json`, e.g. `smollm2-135m-instruct`:
    SmolLM2-135M-Instruct converted offline from its packaged GGUF); else None."""
    if not name_or_path:
        return None
    name = str(name_or_path)
    if "://" in name:
        return None
    if not os.path.isdir(name):
        return None if os.path.isabs(name) or name.startswith((".", "~")) else name
    try:
        with open(os.path.join(name, SOURCE_FILE), encoding="utf-8") as f:
            recorded = json.load(f).get("base_model")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and recorded:
        return recorded
    from .models import DEFAULT_CACHE, KNOWN_FOLDERS  # folders converted before the marker existed

    folder = Path(name).resolve()
    return KNOWN_FOLDERS.get(folder.name) if folder.parent == Path(DEFAULT_CACHE).resolve() else None


def fix_base_model(card: str, name_or_path: str | None, hub_model_id: str | None, output_dir: str) -> str:
    """TRL's card names a base model only when it is a Hub id and loads `model="<hub_model_id>"`: from a local folder
    (or a model alias) and without `push_to_hub` that reads "[None](https://huggingface.co/None)" and `model="None"`.
    Name the real base model instead and load the saved folder."""
    hub_id = base_model_id(name_or_path)
    described = f"[{hub_id}](https://huggingface.co/{hub_id})" if hub_id else describe_model(name_or_path)
    card = re.sub(r"\[None\]\(https://huggingface\.co/None\)", lambda _: described, card)
    if hub_id and card.startswith("---\n") and not re.search(r"^base_model:", card.split("\n---", 1)[0], re.MULTILINE):
        card = f"---\nbase_model: {hub_id}\n" + card[4:]
    target = hub_model_id or f"./{Path(os.path.normpath(output_dir)).name}"
    return card.replace('model="None"', f'model="{target}"')


def report_section(output_dir: str) -> str:
    """Build the run report (`rlce-trl report`) into `<output_dir>/report` and return the card's markdown that embeds
    its curves and links the page; "" when there is nothing to report."""
    import logging

    try:
        from .report import build_report

        page, _ = build_report(output_dir)
    except Exception as error:  # noqa: BLE001 -- the card never fails on its report
        logging.getLogger(__name__).warning("No training report in the model card: %s", error)
        return ""
    folder = os.path.relpath(os.path.dirname(page), output_dir).replace(os.sep, "/")
    png = os.path.join(os.path.dirname(page), "curves.png")
    image = ""
    if os.path.exists(png):
        image = f"![Training curves: rewards, verdicts, ties, verifier time]({folder}/curves.png)\n\n"
    return (f"## Training report\n\n{image}Every reward decision of this run (the distinct answers of each rollout "
            f"group, the evidence tests, the verifier's verdicts and the winner) is in [{folder}/index.html]"
            f"({folder}/index.html), a page that opens offline in a browser.\n")


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


def _label_light(args) -> str | None:
    """The "label-light" line when the verifier's prompts or verdicts were calibrated on labelled cases."""
    parts = []
    if getattr(args, "rlce_prompts_file", None):
        from .evidence.prompt_set import load_prompts

        prompts = load_prompts(args.rlce_prompts_file)
        parts.append(f"prompts version `{prompts.version}` ({prompts.calibrated_on} labelled calibration cases, "
                     f"{len(prompts.examples)} few-shot examples)")
    if getattr(args, "rlce_verdict_calibration_file", None):
        from .verifiers.calibrated import VerdictCalibration

        fitted = VerdictCalibration.load(args.rlce_verdict_calibration_file).fitted_on
        parts.append(f"calibrated verdicts fitted on {fitted} labelled claims")
    return "**label-light**: " + "; ".join(parts) if parts else None


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
        ("Reward",
         f"{args.rlce_verified_weight} x verified answer + {args.rlce_format_weight} x `\\boxed{{}}` format"),
        ("Tests per direction", str(args.rlce_tests_per_direction)),
        ("Dataset", dataset),
        ("Recipe", f"`{os.path.basename(recipe)}`" if recipe else "none (arguments given in code)"),
        ("Training", (f"{training}; G={args.num_generations}, lr={args.learning_rate}, beta={args.beta}, "
                      f"steps={trainer.state.global_step}")),
        ("Paper", f"*{PAPER_TITLE}*"),
    ]
    if info.get("adaptation"):  # test-time adaptation (rlce_trl.scripts.tta): which split
        rows.insert(6, ("Adaptation", info["adaptation"]))
    label_light = _label_light(args)
    if label_light:
        rows.insert(2, ("Verifier calibration", label_light))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    settings = "\n".join(f"- `{k}`: `{v}`" for k, v in public_settings(args).items())
    provenance = (
        "Rewards use no gold labels, but the verifier was calibrated on a small labelled set (label-light)."
        if label_light
        else "No gold labels are used."
    )
    text = f"""{BEGIN}
## RLCE

This model was trained with **RLCE** (Reinforcement Learning with Comparative Evidence, *{PAPER_TITLE}*) through
[rlce-trl](https://github.com/rlce-trl/rlce-trl)'s `RLCEGRPOTrainer`: a frozen verifier builds and validates
comparative evidence tests between the distinct answers of each rollout group, and the answer with the best evidence
is rewarded. {provenance}

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
    report = report_section(trainer.args.output_dir)
    if report:
        section = section.replace(END, report + END)
    from .health import card_section  # the alarms raised, and why the run stopped if the monitor stopped it

    section = section.replace(END, card_section(getattr(trainer, "health", None), trainer.state.global_step) + END)
    card = fix_base_model(card, getattr(trainer.accelerator.unwrap_model(trainer.model).config, "_name_or_path", None),
                          trainer.hub_model_id, trainer.args.output_dir)
    anchor = "### Framework versions"
    card = card.replace(anchor, section + "\n" + anchor, 1) if anchor in card else card.rstrip() + "\n\n" + section
    path.write_text(redact(card), encoding="utf-8")
