"""Hostile input through the real `rlce-trl` command line (issue 27), one group of cases per command: each ends in a
non-zero exit and a few lines on stderr (the last one `error: ...`, naming the fix), with no traceback, before any
model loads (the model paths given here do not exist, or are folders with a bare config.json that would fail to
load). Also the parser tree itself: help on every flag, one dialect, `--version`, "did you mean"."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

from rlce_trl import __version__
from rlce_trl.cli import build_parser, main
from rlce_trl.data.hba import URFUNNY_LABELS
from rlce_trl.errors import InputError

ROW = {"id": "r0", "task": "urfunny", "prompt": [{"role": "user", "content": "clip 0: funny?"}],
       "answer_options": list(URFUNNY_LABELS), "gold": "humour"}


def run(capsys, argv, max_lines: int = 3) -> tuple[int, str]:
    """`rlce-trl argv` in process: a non-zero exit, at most `max_lines` on stderr, the last an `error:` line."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err + captured.out
    assert code not in (0, None), (argv, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), err
    assert len(lines) <= max_lines, err
    return code, lines[-1]


def leaf_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, by its name (`calibrate score`, `analyze ttt`, ...)."""
    found = {}

    def walk(parser, name):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        children = dict(getattr(parser, "commands", {}))
        for action in subs:
            children.update(action.choices)
        if not subs:
            found[name] = parser
        for child, sub in children.items():
            walk(sub, f"{name} {child}".strip())

    walk(build_parser(), "")
    return found


# -- the parser tree --------------------------------------------------------------------------------------------------
def test_every_command_and_flag_has_help_and_one_dialect():
    missing, kebab = [], []
    for name, parser in {"": build_parser(), **leaf_parsers()}.items():
        if name and not parser.description:
            missing.append(f"{name}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{name} {c}: no description" for c, p in action.choices.items() if not p.description]
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings or action.dest}: no help")
            kebab += [f"{name} {o}" for o in action.option_strings if o.startswith("--") and "-" in o[2:]]
            if "--out" in action.option_strings:
                kebab.append(f"{name} --out (use --output_dir or --output_file)")
    assert not missing and not kebab, missing + kebab
    assert {"calibrate score", "analyze ttt", "analyze coevolve", "train", "sample", "select"} <= set(leaf_parsers())


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"rlce-trl {__version__}"


@pytest.mark.parametrize("argv, usage, suggestion", [
    (["evaluate", "--batch_sise", "3"], "usage: rlce-trl evaluate", "did you mean '--batch_size'?"),
    (["analyze", "--max-tets", "3"], "usage: rlce-trl analyze", "did you mean '--max_tests'?"),
    (["calibrate", "fit", "--output_fil", "x.json"], "usage: rlce-trl calibrate fit", "did you mean '--output_file'?"),
    (["analyze", "coevolve", "run", "--rlce_gpu", "2"], "usage: rlce-trl analyze coevolve", "--rlce_gpus"),
    (["sample", "--model_name_or_pat", "m"], "usage: rlce-trl sample", "did you mean '--model_name_or_path'?"),
])
def test_unknown_flag_shows_the_command_usage_and_the_closest_flag(capsys, argv, usage, suggestion):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(usage) and suggestion in err.strip().splitlines()[-1]
    assert "usage: rlce-trl [-h]" not in err  # not the top-level usage


@pytest.mark.parametrize("argv, suggestion", [
    (["analyze", "--simulate", "--out", "x"], "--output_dir"),
    (["analyze", "--simulate", "--error-rates", "0.3"], "--error_rates"),
    (["calibrate", "score", "--out", "x.jsonl"], "--output_file"),
])
def test_an_old_spelling_is_refused_naming_the_flag(capsys, argv, suggestion):
    """One dialect and no aliases (the package was never released under another): an old spelling is an unknown flag
    whose error names the one that replaced it."""
    code = main(argv)
    assert code == 2 and suggestion in capsys.readouterr().err.strip().splitlines()[-1]


# -- every flag type of every command: a bad value is one line, before anything runs --------------------------------
def bad_values(action) -> list[str]:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return ["no-such-choice"]
    kind = getattr(action.type, "__name__", str(action.type))
    if action.type is int or "int" in kind:
        return ["x", "1.5", *(["0", "-3"] if kind == "positive_int" else []),
                *(["-1"] if kind == "nonnegative_int" else [])]
    if action.type is float:
        return ["x"]
    return []


CASES = [(name, action.option_strings[0], value) for name, parser in sorted(leaf_parsers().items())
         for action in parser._actions if action.option_strings for value in bad_values(action)]


def test_the_fuzz_covers_every_command_with_typed_flags():
    assert {name for name, _, _ in CASES} >= {"evaluate", "analyze", "analyze coevolve", "report", "sample", "select",
                                             "calibrate score", "calibrate fit", "calibrate run", "calibrate export",
                                             "compare", "prepare-prefeval"}
    assert len(CASES) > 100


@pytest.mark.parametrize("name, flag, value", CASES, ids=[f"{n}{f}={v}" for n, f, v in CASES])
def test_bad_flag_value_is_one_line(capsys, name, flag, value):
    _, line = run(capsys, [*name.split(), flag, value], max_lines=1)
    assert flag in line


# -- per command ------------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_model(tmp_path):
    """A folder that passes the path checks (config.json) but would fail to load: nothing may load it."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_report(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "file").write_text("x")
    assert "is a file" in run(capsys, ["report", run_dir, "--output_dir", tmp_path / "file"])[1]
    assert "--max_groups" in run(capsys, ["report", run_dir, "--max_groups", "0"])[1]


def test_calibrate(tmp_path, capsys, fake_model):
    (tmp_path / "folder").mkdir()
    _, line = run(capsys, ["calibrate", "score", "--verifier_model_name_or_path", tmp_path / "missing"])
    assert "--verifier_model_name_or_path" in line
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"validation": 5}))
    _, line = run(capsys, ["calibrate", "score", "--verifier_model_name_or_path", fake_model, "--prompts", prompts])
    assert "`validation` must be a string" in line
    _, line = run(capsys, ["calibrate", "fit", "--verifier_model_name_or_path", fake_model, "--output_file",
                           tmp_path / "folder"])
    assert "is a folder" in line
    _, line = run(capsys, ["calibrate", "fit", "--no_prior", "--no_band", "--output_file", tmp_path / "c.json"])
    assert "nothing to fit" in line
    for argv in (["score", "--resamples", "0"], ["score", "--batch_size", "0"], ["run", "--max_versions", "0",
                                                                              "--output_file", "x"]):
        run(capsys, ["calibrate", *argv], max_lines=1)
    groups = tmp_path / "g.jsonl"
    groups.write_text("".join(json.dumps({"id": k, "junk": True}) + "\n" for k in range(4)))
    _, line = run(capsys, ["calibrate", "export", "--groups", groups, "--output_file", tmp_path / "folder"])
    assert "is a folder" in line
    _, line = run(capsys, ["calibrate", "export", "--groups", groups, "--output_file", tmp_path / "q.jsonl"])
    assert "all 4 groups" in line and not (tmp_path / "q.jsonl").exists()


def test_coevolve(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(ROW) + "\n")
    (tmp_path / "file").write_text("x")
    base = ["coevolve", "--method", "rlac", "--train_file", train]
    _, line = run(capsys, [*base, "--config", "quickstart_rlac", "--output_dir", tmp_path / "file"])
    assert "is a file" in line
    _, line = run(capsys, [*base, "--config", "quickstart", "--output_dir", tmp_path / "out"])
    assert "training recipe" in line and "rlce-trl train --config quickstart" in line
    assert not (tmp_path / "out").exists()


def test_analyze(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    _, line = run(capsys, ["analyze", log, "--simulate", "--output_dir", tmp_path / "o"])
    assert "LOG and --simulate" in line and not (tmp_path / "o").exists()
    _, line = run(capsys, ["analyze", "--synthetic", "999999999999", "--output_dir", tmp_path / "o"], max_lines=1)
    assert "100_000" in line
    assert "give a logged-groups JSONL" in run(capsys, ["analyze", "--output_dir", tmp_path / "o"])[1]
    (tmp_path / "folder").mkdir()
    _, line = run(capsys, ["analyze", "coevolve", tmp_path, "--output_file", tmp_path / "folder"])
    assert "is a folder" in line
    _, line = run(capsys, ["analyze", "coevolve", tmp_path, "--output_file", tmp_path / "missing" / "x.md"])
    assert f"the folder {str(tmp_path / 'missing')!r} does not exist; create it first" in line


def test_sample(tmp_path, capsys, fake_model):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    base = ["sample", "--model_name_or_path", fake_model, "--output_dir", tmp_path / "pool"]
    _, line = run(capsys, [*base, "--data", empty])
    assert "has no rows" in line and not (tmp_path / "pool").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a"}) + "\n" + json.dumps({"prompt": "q"}) + "\n")
    _, line = run(capsys, [*base, "--data", bad])
    assert "row 1: no `prompt`; row 2: no `id`" in line
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"id": "a", "prompt": "q"}) + "\n" + json.dumps({"id": "b", "prompt": 7}) + "\n")
    code = main(["sample", "--model_name_or_path", tmp_path / "missing", "--output_dir", tmp_path / "pool",
                 "--data", mixed])
    err = capsys.readouterr().err
    assert code == 2 and "skipping 1 of 2 rows (row 2: bad prompt" in err.splitlines()[0]


def test_evaluate_checks_the_clips_before_the_model(tmp_path, capsys, fake_model):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({**ROW, "videos": ["clips/0.mp4"]}) + "\n")
    (tmp_path / "media").mkdir()
    _, line = run(capsys, ["evaluate", "--model_name_or_path", fake_model, "--data", data, "--output_dir",
                           tmp_path / "out", "--media_root", tmp_path / "media", "--no_progress"])
    assert "clips/0.mp4 (missing)" in line and "--media_root" in line


@pytest.mark.parametrize("recipe, words", [
    ("script: prefeval\nlerning_rate: 1.0e-5\n",
     "unknown key 'lerning_rate' in {path}: did you mean 'learning_rate'?"),
    ("script: prefeval\nlearning_rate: fast\n", "recipe.yaml: learning_rate: 'fast' is not a valid float"),
    ("script: prefeval\nnum_generations: [1, 2]\n", "recipe.yaml: num_generations: [1, 2] is a list"),
    ("script: prefeval\nnum_generations: 2.5\n", "recipe.yaml: num_generations: 2.5 is not a valid"),
    ("script: prefeval\nuse_vllm: 3\n", "recipe.yaml: use_vllm: 3 is not a valid boolean"),
    (b"script: prefeval\n# caf\xe9\n", "{path} is not UTF-8"),
    ("script: prefeval\n  - : [\n", "not valid YAML"),
])
def test_train_recipe_errors_are_one_line(tmp_path, capsys, recipe, words):
    path = tmp_path / "recipe.yaml"
    path.write_bytes(recipe if isinstance(recipe, bytes) else recipe.encode())
    _, line = run(capsys, ["train", "--config", path, "--output_dir", tmp_path / "out"], max_lines=1)
    assert words.format(path=path) in line, line


def test_train_override_typo_gets_a_suggestion(tmp_path, capsys):
    _, line = run(capsys, ["train", "--config", "quickstart", "--lerning_rate", "3", "--output_dir", tmp_path / "o"],
                  max_lines=1)
    assert "did you mean '--learning_rate'?" in line


def test_the_training_script_itself_prints_one_line(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("script: prefeval\nlearning_rate: fast\n")
    result = subprocess.run([sys.executable, "-m", "rlce_trl.scripts.train_prefeval", "--config", str(path),
                             "--output_dir", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert re.match(r"error: recipe\.yaml: learning_rate: .fast. is not a valid float", lines[0]), result.stderr


def test_coevolve_recipe_key_typo_gets_a_suggestion(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(ROW) + "\n")
    _, line = run(capsys, ["coevolve", "--method", "rlac", "--config", "quickstart_rlac", "--train_file", train,
                           "--output_dir", tmp_path / "out", "--lerning_rate", "3"], max_lines=1)
    assert "did you mean '--learning_rate'?" in line
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("coevolve_method: rlac\nlerning_rate: 1.0e-5\n")
    _, line = run(capsys, ["coevolve", "--method", "rlac", "--config", recipe, "--train_file", train,
                           "--output_dir", tmp_path / "out"], max_lines=1)
    assert "unknown key 'lerning_rate'" in line and "did you mean 'learning_rate'?" in line


@pytest.mark.parametrize("flag, value", [("--task", "mine.yaml"), ("--push_to_hub", "true"),
                                         ("--tta_split", "test"), ("--validation_steps", "5")])
def test_coevolve_refuses_script_flags_it_does_not_use(flag, value, tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(ROW) + "\n")
    _, line = run(capsys, ["coevolve", "--method", "rlac", "--config", "quickstart_rlac", "--train_file", train,
                           "--output_dir", tmp_path / "out", flag, value], max_lines=1)
    assert line.startswith(f"error: {flag}: co-evolution does not use {flag[2:]}: drop it"), line
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(f"coevolve_method: rlac\nuse_cpu: true\nbf16: false\n{flag[2:]}: {value}\n")
    _, line = run(capsys, ["coevolve", "--method", "rlac", "--config", recipe, "--train_file", train,
                           "--output_dir", tmp_path / "out"], max_lines=1)
    assert line.startswith(f"error: mine.yaml: co-evolution does not use {flag[2:]}"), line


def test_elect_recipe_errors_are_one_line(tmp_path, capsys):
    recipe = tmp_path / "elect.yaml"
    recipe.write_text("script: elect\nmax_step: 3\n")
    _, line = run(capsys, ["train", "--config", recipe, "--output_dir", tmp_path / "o"], max_lines=1)
    assert "unknown key 'max_step'" in line and "did you mean 'max_steps'?" in line
    recipe.write_text("script: elect\nmax_steps: many\n")
    _, line = run(capsys, ["train", "--config", recipe, "--output_dir", tmp_path / "o"], max_lines=1)
    assert "max_steps: 'many'" in line
    _, line = run(capsys, ["train", "--config", "elect_numbered_evidence", "--output_dir", tmp_path / "o",
                           "--max_steps", "many"], max_lines=1)
    assert "--max_steps" in line
    recipe.write_text("script: elect\nmax_steps: [1]\n")
    _, line = run(capsys, ["train", "--config", recipe, "--output_dir", tmp_path / "o"], max_lines=1)
    assert "max_steps: [1] is a list, not a single value" in line  # the same parser as the other scripts


@pytest.mark.parametrize("argv, suggestion", [
    (["evalute"], "did you mean 'evaluate'?"),
    (["calibrate", "scroe"], "did you mean 'score'?"),
    (["evaluate", "--model_name_or_path", "m", "--data", "d", "--output_dir", "o", "--dtype", "bfloat61"],
     "did you mean 'bfloat16'?"),
])
def test_a_mistyped_command_or_choice_gets_a_suggestion(capsys, argv, suggestion):
    _, line = run(capsys, argv, max_lines=1)
    assert line.endswith(suggestion)


# -- first-run mistakes of `rlce-trl train` (issue 43): one line, before a model loads --------------------------------
@pytest.mark.parametrize("flags, words", [
    (["--learning_rate", "-1e-6"], "error: --learning_rate -1e-06: a learning rate must be > 0"),  # read as a value
    (["--learning_rate=-1e-6"], "error: --learning_rate -1e-06: a learning rate must be > 0"),
    (["--learning_rate", "0"], "error: --learning_rate 0: a learning rate must be > 0"),
    (["--max_steps", "0"], "error: --max_steps 0 trains nothing"),
    (["--max_steps", "-1", "--num_train_epochs", "0"], "error: --num_train_epochs 0 trains nothing"),
    (["--max_steps", "many"], "error: argument --max_steps"),  # the flag, not the recipe file
    (["--num_generations", "1"], "error: --num_generations: Invalid RLCEGRPOConfig"),
    (["--output_dir", "FILE"], "is a file: pass a folder"),
    (["--output_dir", "FILE/run"], "cannot be created: "),
])
def test_a_bad_training_setting_is_one_line_naming_the_flag(tmp_path, capsys, fake_model, flags, words):
    (tmp_path / "FILE").write_text("not a folder")
    flags = [str(tmp_path / f) if f.startswith("FILE") else f for f in flags]
    code, line = run(capsys, ["train", "--config", "quickstart", "--model_name_or_path", fake_model,
                              "--output_dir", tmp_path / "out", *flags], max_lines=1)
    assert code == 2 and words in line and "quickstart.yaml" not in line, line
    assert not (tmp_path / "out").exists()


def test_a_bad_setting_in_the_recipe_names_the_recipe(tmp_path, capsys, fake_model):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("script: prefeval\ndataset_name: sample\nlearning_rate: -1.0e-6\nuse_cpu: true\nbf16: false\n")
    _, line = run(capsys, ["train", "--config", recipe, "--model_name_or_path", fake_model, "--output_dir",
                           tmp_path / "out"], max_lines=1)
    assert line.startswith("error: mine.yaml: learning_rate -1e-06: a learning rate must be > 0"), line


def test_an_output_folder_that_takes_no_file_is_refused(tmp_path, capsys, fake_model):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        from rlce_trl.errors import output_dir_problem

        if output_dir_problem(folder) is None:
            pytest.skip("this user writes into a read-only folder (root)")
        _, line = run(capsys, ["train", "--config", "quickstart", "--model_name_or_path", fake_model,
                               "--output_dir", folder / "run"], max_lines=1)
        assert "cannot be created in" in line and "pass a folder you can write to" in line
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize("content, words", [
    (b'{"prompt": "hi", "gold": "a"}\n{"prompt": "hi", "gol\n', "line 2 is not valid JSON"),
    (b"prompt,gold\ncaf\xe9,a\n", "is not UTF-8 text (byte 15"),
    (b"prompt;gold\nhi;a\n", "reads as one column: its header 'prompt;gold' is separated by semicolons"),
    (b"", "is empty"),
    (b"  \n\n", "is empty"),
], ids=["truncated-jsonl", "latin1-csv", "semicolon-csv", "empty", "blank"])
def test_a_bad_data_file_names_the_line_byte_or_delimiter(tmp_path, capsys, fake_model, content, words):
    name = "rows.csv" if b"gold\n" in content or b";" in content else "rows.jsonl"
    (tmp_path / name).write_bytes(content)
    _, line = run(capsys, ["train", "--config", "quickstart", "--model_name_or_path", fake_model, "--dataset_name",
                           tmp_path / name, "--output_dir", tmp_path / "out"], max_lines=1)
    assert f"--dataset_name {name} " in line and words in line, line


def test_a_local_looking_model_path_is_never_sent_to_the_hub(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # a Hub id would be tried: this path must not be
    (tmp_path / "runs").mkdir()
    for name in ["runs/model", "somewhere/checkpoint-500"]:
        _, line = run(capsys, ["train", "--config", "quickstart", "--model_name_or_path", name, "--output_dir",
                               tmp_path / "out"], max_lines=1)
        assert f"model_name_or_path {name!r}: no such folder" in line, line


@pytest.fixture(scope="module")
def short_context_model(tmp_path_factory):
    """The tiny model with a 160-token context: the quickstart's prompts (126 tokens and more) do not all fit."""
    from testing_utils import _save_random_llama, build_tokenizer

    path = tmp_path_factory.mktemp("short") / "model"
    _save_random_llama(path, build_tokenizer(), hidden_size=16, max_position_embeddings=160, bos_token_id=None,
                       tie_word_embeddings=False)
    return path


def test_prompts_longer_than_the_model_context_are_refused_or_counted(tmp_path, short_context_model, caplog):
    from rlce_trl.data.sample import load_preference_sample
    from rlce_trl.training.pipeline import filter_long_prompts

    rows = load_preference_sample("train")
    kept = filter_long_prompts(rows, str(short_context_model), None, max_completion_length=16)
    assert 0 < len(kept) < len(rows)
    assert f"Dropped {len(rows) - len(kept)} of {len(rows)} rows whose prompt is longer than 144 tokens" in caplog.text
    assert "set max_prompt_length to choose the limit" in caplog.text
    with pytest.raises(InputError, match="All 32 prompts are longer than the model's context of 160 tokens less "
                                         "max_completion_length=150 "):
        filter_long_prompts(rows, str(short_context_model), None, max_completion_length=150)


def test_train_help_shows_the_common_flags_and_each_is_an_argument(capsys):
    from rlce_trl.cli.train import COMMON_FLAGS
    from rlce_trl.scripts.train_prefeval import make_parser

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    options = make_parser()._option_string_actions
    for flag, _ in COMMON_FLAGS:
        assert flag in out and flag.split()[0] in options, flag
    assert "python -m rlce_trl.scripts.train_prefeval --help" in out


def test_env_prints_what_a_bug_report_needs(capsys):
    from rlce_trl.cli.env import BACKEND_NEEDS
    from rlce_trl.config import VERIFIER_MODES

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert f"- rlce-trl version: {__version__}" in out
    for name in ["TRL", "Transformers", "PyTorch", "Accelerate", "DeepSpeed", "vLLM"]:
        assert re.search(rf"^- {name} version: \S", out, re.M), name
    assert "- Accelerator: " in out and "smollm2-135m-instruct" in out
    assert list(BACKEND_NEEDS) == list(VERIFIER_MODES)


def test_evaluate_never_sends_a_local_looking_path_to_the_hub(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    (tmp_path / "runs").mkdir()
    _, line = run(capsys, ["evaluate", "--model_name_or_path", "runs/model", "--data", "sample", "--output_dir",
                           tmp_path / "eval"], max_lines=3)
    assert "--model_name_or_path 'runs/model': no such folder" in line, line
