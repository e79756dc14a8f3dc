"""The model card after a real tiny run through the scripts' tail (`train_and_save`): the real base model instead of
TRL's "[None](https://huggingface.co/None)", a loadable `model=` in the snippet, the curves embedded and the report
linked; and the report written and announced at the end."""

import json

import pytest

from rlce_trl.model_card import base_model_id, fix_base_model

TRL_CARD = """---
library_name: transformers
tags:
- trl
---

# Model Card for out

This model is a fine-tuned version of [None](https://huggingface.co/None).

generator = pipeline("text-generation", model="None", device_map="auto")
"""


def test_a_model_alias_folder_is_named_by_its_hub_id(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    assert base_model_id(str(folder)) is None  # a plain local folder: no Hub id to claim
    (folder / "rlce_source.json").write_text(json.dumps({"base_model": "HuggingFaceTB/SmolLM2-135M-Instruct"}))
    assert base_model_id(str(folder)) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    card = fix_base_model(TRL_CARD, str(folder), None, str(tmp_path / "quickstart"))
    assert "huggingface.co/None" not in card and 'model="None"' not in card
    assert "[HuggingFaceTB/SmolLM2-135M-Instruct](https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct)" in card
    assert card.startswith("---\nbase_model: HuggingFaceTB/SmolLM2-135M-Instruct\n")
    assert 'model="./quickstart"' in card
    assert 'model="me/pushed"' in fix_base_model(TRL_CARD, str(folder), "me/pushed", "x")
    assert base_model_id("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"


@pytest.mark.slow
def test_card_and_report_after_a_real_run(tiny_model_dir, tmp_path, capsys):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer
    from rlce_trl.training.pipeline import train_and_save

    args = tiny_grpo_args(tmp_path / "out", max_steps=2)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(preference_rows(16)))
    train_and_save(trainer, args)
    page = tmp_path / "out" / "report" / "index.html"
    assert f"Training report: {page}" in capsys.readouterr().out and page.exists()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "huggingface.co/None" not in card and 'model="None"' not in card
    assert "fine-tuned version of local folder `model`" in card and 'model="./out"' in card
    assert "![Training curves" in card and "(report/curves.png)" in card and "(report/index.html)" in card
    assert (tmp_path / "out" / "report" / "curves.png").exists()
    meta, headings = check_markdown(card)
    assert [h for _, h in headings] == ["Model Card for out", *SECTIONS[1:4], "Training report", *SECTIONS[4:]]
    assert "licence" not in meta and "see the base model's card" in card  # the tiny model's folder names no license
    assert "A demo run of 2 steps: not a trained model." in card and "2 optimizer steps" in card


def test_an_alias_folder_converted_before_the_marker_is_still_named(tmp_path, monkeypatch):
    monkeypatch.setattr("rlce_trl.models.DEFAULT_CACHE", tmp_path / "cache")
    folder = tmp_path / "cache" / "SmolLM2-135M-Instruct"
    folder.mkdir(parents=True)
    assert base_model_id(str(folder)) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    elsewhere = tmp_path / "mine" / "SmolLM2-135M-Instruct"
    elsewhere.mkdir(parents=True)
    assert base_model_id(str(elsewhere)) is None  # a user's own folder of that name is not claimed


# -- the whole card, from TRL's own template -------------------------------------------------------------------------
SUFFIX = "Answer in one short sentence and end with your answer in \\boxed{}, for example \\boxed{a short answer}."
SECTIONS = ["Model Card for quickstart", "Quick start", "Training procedure", "RLCE", "Training health",
            "Framework versions", "License", "Citations"]


def check_markdown(card: str) -> tuple[dict, list[tuple[int, str]]]:
    """Parse the card as a Hub renderer would (YAML front matter, then CommonMark with tables) and assert that it is
    well-formed: one title and no skipped heading level, every fence closed, every <details> closed and holding no
    swallowed markdown, no empty code span. Returns (metadata, headings)."""
    import yaml
    from markdown_it import MarkdownIt

    assert card.startswith("---\n"), "no YAML front matter"
    front, body = card[4:].split("\n---\n", 1)
    meta = yaml.safe_load(front)
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    headings = [(int(t.tag[1]), tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"]
    levels = [level for level, _ in headings]
    assert levels and levels[0] == 1 and levels.count(1) == 1, headings
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), f"a heading level skipped: {headings}"
    for t in tokens:
        if t.type == "fence":
            assert t.info in ("python", "bibtex") and t.markup == "```", t.info
            assert not any(line.startswith(("```", "#")) for line in t.content.splitlines()), "a fence left open"
        if t.type == "html_block":
            assert not any(line.startswith(("#", "|", "- ")) for line in t.content.splitlines()), \
                f"markdown swallowed by an HTML block: {t.content!r}"
    html = "".join(t.content for t in tokens if t.type == "html_block")
    assert html.count("<details") == html.count("</details>"), "a <details> left open"
    for t in tokens:
        for child in t.children or []:
            assert child.type != "code_inline" or child.content.strip(), "an empty code span"
            assert child.type != "text" or "``" not in child.content, f"stray backticks: {child.content!r}"
    return meta, headings


def trl_card(out) -> str:
    """TRL's own card (its template, through `generate_model_card` as `create_model_card` calls it for a model that
    is not a Hub id), saved as `out/README.md`."""
    from trl.trainer.utils import generate_model_card

    from rlce_trl import RLCEGRPOTrainer

    out.mkdir(exist_ok=True)
    paper = RLCEGRPOTrainer._paper
    generate_model_card(base_model=None, model_name="quickstart", hub_model_id=None, dataset_name=None,
                        tags=RLCEGRPOTrainer._tag_names, wandb_url=None, trackio_url=None,
                        trainer_name=RLCEGRPOTrainer._name, trainer_citation=paper["citation"],
                        paper_title=paper["title"], paper_id=paper["id"]).save(out / "README.md")
    return (out / "README.md").read_text(encoding="utf-8")


def make_card(tmp_path, base, steps=4, info=None, edit=None, **overrides):
    """TRL's card (`edit`: changed first, as a TRL release could) completed by `add_rlce_section` for a trainer of
    `steps` steps from the model `base`."""
    from types import SimpleNamespace

    from rlce_trl import RLCEGRPOConfig
    from rlce_trl.model_card import add_rlce_section

    out = tmp_path / "quickstart"
    card = trl_card(out)
    if edit is not None:
        (out / "README.md").write_text(edit(card), encoding="utf-8")
    args = RLCEGRPOConfig(output_dir=str(out), report_to="none", use_cpu=True, bf16=False, num_generations=4,
                          per_device_train_batch_size=4, max_completion_length=48, **overrides)
    model = SimpleNamespace(config=SimpleNamespace(_name_or_path=str(base)))
    trainer = SimpleNamespace(args=args, model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                              hub_model_id=None, state=SimpleNamespace(global_step=steps),
                              rlce_card_info=info if info is not None else {
                                  "dataset": "the bundled preference sample", "recipe": "configs/quickstart.yaml",
                                  "prompt_suffix": SUFFIX})
    add_rlce_section(trainer, out / "README.md")
    return (out / "README.md").read_text(encoding="utf-8")


def alias_folder(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    (folder / "rlce_source.json").write_text(json.dumps({"base_model": "HuggingFaceTB/SmolLM2-135M-Instruct"}))
    return folder


def test_every_change_to_trls_card_finds_its_text_in_trls_template(tmp_path):
    """Each text of TRL's card that a change relies on (`TRL_ANCHORS`) is in the card TRL's template renders, once: a
    TRL release that rewords one fails here instead of leaving TRL's text in the card."""
    import re

    from rlce_trl.model_card import TRL_ANCHORS

    card = trl_card(tmp_path / "trl")
    for name, (pattern, _) in TRL_ANCHORS.items():
        assert len(re.findall(pattern, card, re.MULTILINE)) == 1, f"TRL's card lacks {name!r} ({pattern})"


def test_a_reworded_trl_card_is_a_warning_not_a_silent_no_op(tmp_path, caplog):
    card = make_card(tmp_path, alias_folder(tmp_path), edit=lambda c: c.replace("## Quick start", "## Try it"))
    assert "no longer has the text 'quick_start'" in caplog.text and "time machine" in card  # TRL's text is kept
    assert "### RLCE" in card and "## License" in card  # the other changes still apply


def test_a_demo_card_renders_and_says_what_it_is(tmp_path):
    import re

    from rlce_trl.model_card import BEGIN, END, PAPER_ID

    card = make_card(tmp_path, alias_folder(tmp_path))
    meta, headings = check_markdown(card)
    assert [h for _, h in headings] == SECTIONS
    inside = card.split(BEGIN)[1].split(END)[0]  # what rlce-trl adds is between its markers
    assert inside.count("### ") == 2 and "### RLCE" in inside and "### Training health" in inside
    assert meta["license"] == "apache-2.0" and "licence" not in meta and "license: license" not in card
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert "| Verifier model | a frozen copy of the initial checkpoint ([HuggingFaceTB/SmolLM2-135M-Instruct](" in card
    assert "released under its license, `apache-2.0`" in card and "the code that trained it, is Apache-2.0" in card
    assert "A demo run of 4 steps: not a trained model." in card
    # TRL's paper link from the arXiv id, and the full BibTeX entry (no authors: the preprint names none)
    assert f"](https://huggingface.co/papers/{PAPER_ID})" in card
    assert f"eprint       = {{arXiv:{PAPER_ID}}}" in card and "author" not in card.split("@article{rlce2026")[1][:300]
    assert "@article{shao2024deepseekmath" in card  # GRPO, which RLCE runs on
    # the quick start: the policy's system prompt, a question ending with the recipe's suffix, the \boxed{} answer read
    code = re.search(r"```python\n(.*?)```", card, re.DOTALL).group(1)
    assert "time machine" not in card and "\\\\boxed{your answer}" in code
    assert f"suffix = {SUFFIX!r}" in code and 'f"{question} {suffix}"' in code and 'model="./quickstart"' in code
    scope = {}
    exec(code.split("generator = ")[0], scope)  # the strings are what training used
    assert scope["suffix"] == SUFFIX and scope["system"].endswith("\\boxed{your answer}.")
    pattern = re.search(r'answers = re\.findall\((r".*?"), reply\)', code).group(1)
    assert re.findall(eval(pattern), "so \\boxed{pasta} then \\boxed{a curry}") == ["pasta", "a curry"]
    # the training procedure is filled, the empty setting reads as words
    procedure = card.split("## Training procedure")[1].split("### RLCE")[0]
    assert "Training: 4 optimizer steps, 4 rollouts per prompt" in procedure
    assert "Dataset: the bundled preference sample; recipe: `quickstart.yaml`." in procedure
    assert "- `verifier_vllm_args`: *empty*" in card and "``" not in card.replace("```", "")


def test_a_long_run_has_no_demo_line_and_an_unknown_license_is_not_invented(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    card = make_card(tmp_path, folder, steps=500, info={})
    meta, _ = check_markdown(card)
    assert "license" not in meta and "licence" not in meta and "demo run" not in card
    assert "its license is the base model's, see the base model's card" in card
    assert "Give the final answer" not in card and "suffix =" not in card  # no suffix recorded: none shown
    assert "Dataset: not recorded. Training: 500 optimizer steps" in card


@pytest.mark.parametrize("where", ["README.md", "config.json", "rlce_source.json"])
def test_a_local_model_names_its_own_license(tmp_path, where):
    from rlce_trl.model_card import model_license

    folder = tmp_path / "m"
    folder.mkdir()
    if where == "README.md":
        (folder / where).write_text("---\nlicense: mit\ntags:\n- x\n---\n# m\n")
    else:
        (folder / where).write_text(json.dumps({"license": "mit"}))
    assert model_license(str(folder)) == "mit"
    (folder / "README.md").write_text("no front matter")
    (folder / "config.json").write_text("{broken")
    (folder / "rlce_source.json").write_text("[]")
    assert model_license(str(folder)) is None
    assert model_license("someone/not-in-the-cache") is None and model_license(None) is None


def test_the_markdown_check_can_fail():
    glued = "---\nlicense: mit\n---\n\n# T\n\n<details><summary>s</summary>\n\n- `a`: ``\n\n</details>\n## Report\n"
    with pytest.raises(AssertionError):
        check_markdown(glued)
    with pytest.raises(AssertionError):
        check_markdown("---\nx: 1\n---\n\n# T\n\n```python\nprint(1)\n\n## Next\n")
