"""The RLCE part of the model card that `RLCEGRPOTrainer.create_model_card` writes next to TRL's.

TRL's card (`trl/templates/lm_model_card.md`) names the base model, the trainer and TRL's versions. This module adds
one section, between the markers [`BEGIN`] and [`END`]: the method (RLCE, with the paper), the frozen verifier (model
and backend), the RLCE reward settings, the dataset and the recipe, the training-health section and the run report.
Outside the markers it changes TRL's own text in a few places, each found by a pattern of [`TRL_ANCHORS`].

Nothing secret gets in: settings whose name says token / key / secret / password / header are left out, URLs lose
their user-info and query string, local paths are reduced to their last component, and the whole card is scrubbed
the same way before it is written.
"""

from __future__ import annotations

import json
import logging
import os
import re
import textwrap
from pathlib import Path

from . import models
from .credentials import SECRET_NAME, clean_url
from .credentials import scrub as redact
from .data.jsonl import read_json

logger = logging.getLogger(__name__)

BEGIN, END = "<!-- rlce-trl:begin -->", "<!-- rlce-trl:end -->"
SOURCE_FILE = "rlce_source.json"  # written into folders that rlce-trl builds from a Hub model (model aliases)
#: The paper: its title (the card's "Paper" row), its arXiv id and BibTeX entry (TRL's card, through
#: `RLCEGRPOTrainer._paper`: TRL links the paper page from the id). The preprint names no authors, nor does this.
PAPER_TITLE = "Reinforcement Learning with Comparative Evidence for Social Intelligence"
PAPER_ID = "2610.04072"
PAPER_URL = f"https://arxiv.org/abs/{PAPER_ID}"
# docstyle-ignore
PAPER_CITATION = textwrap.dedent(f"""\
    @article{{rlce2026,
        title        = {{{{{PAPER_TITLE}}}}},
        journal      = {{arXiv preprint arXiv:{PAPER_ID}}},
        year         = 2026,
        eprint       = {{arXiv:{PAPER_ID}}},
        url          = {{{PAPER_URL}}},
    }}""")
#: `RLCEGRPOTrainer._paper` (TRL's model-card mechanism: title, arXiv id, citation).
PAPER = {"title": PAPER_TITLE, "id": PAPER_ID, "citation": PAPER_CITATION}
PACKAGE_LICENSE = "Apache-2.0"  # rlce-trl, the training code
#: Licenses of the models rlce-trl converts offline (model aliases), whose folders carry no model card.
KNOWN_LICENSES = {"HuggingFaceTB/SmolLM2-135M-Instruct": "apache-2.0"}
#: Runs with fewer optimizer steps than this get a "demo run" line at the top of the card.
DEMO_STEPS = 50

#: The text of TRL's card (`trl/templates/lm_model_card.md` as `generate_model_card` renders it, TRL 1.16) that each
#: change to it relies on: name -> (pattern, what the change does). `tests/report/test_model_card.py` checks that each
#: one matches TRL's rendered card exactly once. `unnamed_base` and `unnamed_model` appear only when the base model is
#: not a Hub id and there is no `hub_model_id`.
TRL_ANCHORS: dict[str, tuple[str, str]] = {
    "unnamed_base": (r"\[None\]\(https://huggingface\.co/None\)", "names the real base model"),
    "unnamed_model": (r'model="None"', "loads the saved folder in the quick start"),
    "licence": (r"^licence: license\n", "puts the base model's license in the metadata"),
    "trained_using": (r"^It has been trained using \[TRL\].*\n", "adds the demo line after it"),
    "quick_start": (r"^## Quick start\n(?s:.*?)```\n+(?=## )", "replaced by the RLCE quick start"),
    "trained_with": (r"^This model was trained with .*$", "adds the run's summary after it"),
    "framework_versions": (r"^### Framework versions$", "the RLCE section goes before it"),
    "citations": (r"^## Citations$", "the License section goes before it"),
}
_CONDITIONAL = {"unnamed_base", "unnamed_model"}


def find_anchor(card: str, name: str) -> re.Match | None:
    """Where TRL's text `name` of [`TRL_ANCHORS`] is in `card`; a warning when TRL's card no longer has it."""
    found = re.search(TRL_ANCHORS[name][0], card, re.MULTILINE)
    if found is None and name not in _CONDITIONAL:
        logger.warning("TRL's model card no longer has the text %r (%s): that part of the card keeps TRL's wording.",
                       name, TRL_ANCHORS[name][1])
    return found


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
    if not name_or_path or "://" in str(name_or_path):
        return None
    name = str(name_or_path)
    if not os.path.isdir(name):
        return None if os.path.isabs(name) or name.startswith((".", "~")) else name
    recorded = (read_json(os.path.join(name, SOURCE_FILE)) or {}).get("base_model")
    if isinstance(recorded, str) and recorded:
        return recorded
    folder = Path(name).resolve()  # a folder converted before the marker existed
    return models.KNOWN_FOLDERS.get(folder.name) if folder.parent == Path(models.DEFAULT_CACHE).resolve() else None


def base_description(name_or_path: str | None) -> str:
    """The base model as the card names it: a link to its Hub page when it is (or was converted from) a Hub model."""
    hub_id = base_model_id(name_or_path)
    return f"[{hub_id}](https://huggingface.co/{hub_id})" if hub_id else describe_model(name_or_path)


def fix_base_model(card: str, name_or_path: str | None, hub_model_id: str | None, output_dir: str) -> str:
    """TRL's card names a base model only when it is a Hub id and loads `model="<hub_model_id>"`: from a local folder
    (or a model alias) and without `push_to_hub` that reads "[None](https://huggingface.co/None)" and `model="None"`.
    Name the real base model instead and load the saved folder."""
    hub_id = base_model_id(name_or_path)
    described = base_description(name_or_path)
    card = re.sub(TRL_ANCHORS["unnamed_base"][0], lambda _: described, card)
    if hub_id and card.startswith("---\n") and not re.search(r"^base_model:", card.split("\n---", 1)[0], re.MULTILINE):
        card = f"---\nbase_model: {hub_id}\n" + card[4:]
    target = hub_model_id or f"./{Path(os.path.normpath(output_dir)).name}"
    return re.sub(TRL_ANCHORS["unnamed_model"][0], lambda _: f'model="{target}"', card)


def _front_matter_license(readme) -> str | None:
    """The `license:` of the YAML front matter of the model card at `readme`; None when it has none or cannot be
    read."""
    try:
        text = Path(readme).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("---"):
        return None
    head = text[3:].split("\n---", 1)[0]
    found = re.search(r"^license:\s*['\"]?([^'\"\n#]+?)['\"]?\s*$", head, re.MULTILINE)
    return found.group(1).strip() if found else None


def model_license(name_or_path: str | None) -> str | None:
    """The license of the model training started from: a local folder's own metadata (`rlce_source.json`,
    `config.json`, its README's front matter), else the license of the Hub model it is (a model alias, see
    `KNOWN_LICENSES`, or a model card in the local Hub cache); None when nothing says."""
    if not name_or_path:
        return None
    name = str(name_or_path)
    if os.path.isdir(name):
        for file in (SOURCE_FILE, "config.json"):
            value = (read_json(os.path.join(name, file)) or {}).get("license")
            if isinstance(value, str) and value.strip():
                return value.strip()
        value = _front_matter_license(Path(name, "README.md"))
        if value:
            return value
    hub_id = base_model_id(name)
    if not hub_id or hub_id in KNOWN_LICENSES:
        return KNOWN_LICENSES.get(hub_id)
    try:  # a model card downloaded earlier; never a download here
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(hub_id, "README.md")
        return _front_matter_license(cached) if isinstance(cached, str) else None
    except Exception:  # noqa: BLE001 -- a malformed id or cache: the card says "see the base model's card"
        return None


def fix_license(card: str, license_id: str | None, base: str) -> str:
    """TRL's card metadata carries `licence: license` (a placeholder): put the base model's license there (or nothing
    when unknown) and say it in a "License" section before the citations."""
    head, sep, body = card.partition("\n---\n") if card.startswith("---\n") else ("", "", card)
    if sep:
        find_anchor(head + "\n", "licence")
        head = "\n".join(line for line in head.split("\n") if not re.match(r"(licence|license):", line))
        if license_id:
            head += f"\nlicense: {license_id}"
        card = head + sep + body
    if license_id:
        text = (f"This model is a fine-tuned version of {base} and is released under its license, `{license_id}`.")
    else:
        text = (f"This model is a fine-tuned version of {base}: its license is the base model's, see the base model's "
                "card.")
    text += f" rlce-trl, the code that trained it, is {PACKAGE_LICENSE}."
    section = f"## License\n\n{text}\n\n"
    found = find_anchor(card, "citations")
    return card[: found.start()] + section + card[found.start():] if found else card.rstrip() + "\n\n" + section


def fix_quick_start(card: str, target: str, suffix: str | None, max_new_tokens: int | None,
                    messages: list[dict] | None = None, dataset: str = "its task") -> str:
    """Replace TRL's quick start (a generic question, the raw reply) with one that reads the answer from the last
    `\\boxed{}`, the convention RLCE rewards: the run's first training prompt (`messages`, exactly as the policy saw
    it in training) when it recorded one, else the policy's system prompt and a question that ends with the recipe's
    prompt suffix."""
    found = find_anchor(card, "quick_start")
    if not found:
        return card
    tokens = max(256, int(max_new_tokens or 0))
    if messages:
        why = (f"The policy answers the way it was trained on {dataset}: the messages below are its first training "
               "prompt, exactly as\nthe policy saw it, and RLCE read and rewarded the answer in the last `\\boxed{}`.")
        head, tail = f"messages = {json.dumps(messages, ensure_ascii=False, indent=4)}\n", ""
    else:
        from .data.prompts import SOLVER_SYSTEM_PROMPT

        question = "I am vegetarian and I cook for two on weeknights. What should I make for dinner tonight?"
        suffix_line = f"\nsuffix = {suffix!r}  # the recipe's prompt_suffix, as in training" if suffix else ""
        why = ("The policy answers the way it was trained: the training prompts' system prompt asks for the final "
               "answer in `\\boxed{}`, and RLCE read and rewarded the answer in the last `\\boxed{}`" +
               (", with the recipe's prompt suffix at the end of each question." if suffix else "."))
        head = f"system = {SOLVER_SYSTEM_PROMPT!r}\nquestion = {question!r}{suffix_line}\n"
        content = 'f"{question} {suffix}"' if suffix else "question"
        tail = f'messages = [{{"role": "system", "content": system}}, {{"role": "user", "content": {content}}}]\n'
    section = f"""## Quick start

{why}

```python
import re

from transformers import pipeline

{head}generator = pipeline("text-generation", model="{target}", device_map="auto")
{tail}reply = generator(messages, max_new_tokens={tokens}, return_full_text=False)[0]["generated_text"]
answers = re.findall(r"\\\\boxed\\{{([^{{}}]*)\\}}", reply)
print(answers[-1] if answers else "no boxed answer: " + reply)
```

"""
    return card[: found.start()] + section + card[found.end():]


def training_summary(trainer, dataset: str, recipe: str | None) -> str:
    """The paragraph under TRL's "Training procedure": how long, on what, with which settings."""
    args = trainer.args
    steps = trainer.state.global_step
    parts = [f"{steps} optimizer step{'s' if steps != 1 else ''}",
             f"{args.num_generations} rollouts per prompt", f"batch size {args.per_device_train_batch_size} per "
             f"device x {args.gradient_accumulation_steps} accumulation step(s)",
             f"learning rate {args.learning_rate}", f"KL coefficient beta={args.beta}",
             f"completions of at most {args.max_completion_length} tokens"]
    source = f"Dataset: {dataset}" + (f"; recipe: `{os.path.basename(recipe)}`" if recipe else "")
    return (f"{source}. Training: " + ", ".join(parts) + ". The RLCE section below has the verifier and the "
            "reward; every setting is in `training_args.bin` next to the weights.\n")


def fill_training_procedure(card: str, summary: str) -> str:
    """TRL leaves "Training procedure" with its tracker-badge lines empty: drop those, add the run's summary after
    TRL's "This model was trained with ..." line."""
    card = re.sub(r"\n[ \t]+(?=\n)", "\n", card)
    found = find_anchor(card, "trained_with")
    if found:
        card = card[: found.end()] + "\n\n" + summary.rstrip("\n") + card[found.end():]
    else:
        card = card.replace("## Training procedure\n", f"## Training procedure\n\n{summary}", 1)
    return re.sub(r"\n{3,}", "\n\n", card)


def add_demo_line(card: str, steps: int) -> str:
    """A line right under the card's title paragraph for a run too short to mean anything."""
    found = find_anchor(card, "trained_using") if steps < DEMO_STEPS else None
    if not found:
        return card
    line = (f"> **A demo run of {steps} step{'' if steps == 1 else 's'}: not a trained model.** It shows the "
            "mechanics (rollouts, evidence tests, verdicts, rewards); a model worth using trains for hundreds of "
            "steps (see the paper's recipes).")
    return card[: found.end()] + "\n" + line + "\n" + card[found.end():]


def public_settings(args) -> dict[str, object]:
    """The `verifier_*` and `rlce_*` fields of `args`, without anything that could be a secret."""
    out = {}
    for name in dir(args):  # sorted
        if not name.startswith(("verifier_", "rlce_")) or SECRET_NAME.search(name):
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
        return f"the base model ({base_description(base)}) with the LoRA adapter disabled"
    return f"a frozen copy of the initial checkpoint ({base_description(base)})"


#: The verdict calibration that ships with the package (`configs/quickstart.yaml` applies it).
PACKAGED_CALIBRATION = "smollm2-135m-instruct"


def _label_light(args, dataset: str | None = None) -> str | None:
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
        preference_data = dataset == "rlce-trl preference sample" or (dataset or "").startswith("PrefEval")
        if str(args.rlce_verdict_calibration_file) == PACKAGED_CALIBRATION and not preference_data:  # its claims' data
            parts.append(f"the packaged `{PACKAGED_CALIBRATION}` calibration was fitted for that verifier with the "
                         "built-in prompts on preference claims; it was applied to this run's task anyway, which it "
                         "was not fitted on")
    return "**label-light**: " + "; ".join(parts) if parts else None


def setting_value(value) -> str:
    """A setting as markdown: code for a value, words for an empty one (an empty code span shows two backticks)."""
    if value is None:
        return "*not set*"
    text = str(value)
    if not text.strip():
        return "*empty*"
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def rlce_section(trainer, info: dict, dataset: str) -> str:
    """The markdown section (between markers) for `trainer`, an `RLCEGRPOTrainer`, with its `rlce_card_info`."""
    args = trainer.args
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
        ("Paper", f"[*{PAPER_TITLE}*]({PAPER_URL})"),
    ]
    if info.get("adaptation"):  # test-time adaptation (rlce_trl.training.tta): which split
        rows.insert(6, ("Adaptation", info["adaptation"]))
    label_light = _label_light(args, dataset)
    if label_light:
        rows.insert(2, ("Verifier calibration", label_light))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    settings = "\n".join(f"- `{k}`: {setting_value(v)}" for k, v in public_settings(args).items())
    provenance = ("Rewards use no gold labels, but the verifier was calibrated on a small labelled set (label-light)."
                  if label_light else "No gold labels are used.")
    text = f"""{BEGIN}
### RLCE

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


def _example_prompt(trainer) -> list[dict] | None:
    """The first training row's chat messages (text only), as the policy was prompted; `None` when not readable."""
    try:
        prompt = trainer.train_dataset[0].get("prompt")
    except Exception:  # noqa: BLE001 -- an iterable or empty dataset: the generic quick start
        return None
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                               for m in prompt):
        return None
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def add_rlce_section(trainer, readme_path: str | os.PathLike, dataset_name: str | None = None,
                     report: str = "") -> None:
    """Complete TRL's card at `readme_path`: the real base model and its license, a quick start in the answer
    convention, the run's summary (and a line when it is a demo), the RLCE section (with `report`, the training
    report's markdown from `rlce_trl.report.card_section`, if any) before TRL's "Framework versions"; then scrub the
    whole card. Does nothing when there is no card."""
    path = Path(readme_path)
    if not path.exists():
        return
    card = path.read_text(encoding="utf-8")
    if BEGIN in card and END in card:
        card = card[: card.index(BEGIN)] + card[card.index(END) + len(END) :].lstrip("\n")
    args = trainer.args
    info = dict(getattr(trainer, "rlce_card_info", None) or {})
    dataset = dataset_name or info.get("dataset")
    name_or_path = getattr(trainer.accelerator.unwrap_model(trainer.model).config, "_name_or_path", None)
    section = rlce_section(trainer, info, dataset or "not recorded")
    if report:
        section = section.replace(END, report + "\n" + END)
    from .health import card_section  # the alarms raised, and why the run stopped if the monitor stopped it

    section = section.replace(END, card_section(getattr(trainer, "health", None), trainer.state.global_step) + END)
    card = fix_base_model(card, name_or_path, trainer.hub_model_id, args.output_dir)
    target = trainer.hub_model_id or f"./{Path(os.path.normpath(args.output_dir)).name}"
    card = fix_quick_start(card, target, info.get("prompt_suffix"), getattr(args, "max_completion_length", None),
                           _example_prompt(trainer), dataset or "its task")
    card = fill_training_procedure(card, training_summary(trainer, dataset or "not recorded", info.get("recipe")))
    card = add_demo_line(card, trainer.state.global_step)
    if "## License\n" not in card:
        card = fix_license(card, model_license(name_or_path), base_description(name_or_path))
    found = find_anchor(card, "framework_versions")
    card = card[: found.start()] + section + "\n" + card[found.start():] if found else card.rstrip() + "\n\n" + section
    path.write_text(redact(card), encoding="utf-8")
