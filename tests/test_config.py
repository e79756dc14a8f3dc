import inspect
import re

import pytest

from rlce_trl import RLCEGRPOConfig

CPU = dict(output_dir="out", bf16=False, use_cpu=True, report_to="none")  # relative: inside tmp_path (below)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    "overrides, fix",
    [
        (dict(num_generations=1, per_device_train_batch_size=1), "set num_generations to 2 or more"),
        (dict(rlce_verified_weight=-0.1), "reward weights must be >= 0"),
        (dict(rlce_verified_weight=0.0, rlce_format_weight=0.0), "set at least one above 0"),
        (dict(rlce_mode="fixed"), "use one of evolving, static, pointwise"),
        (dict(verifier_mode="remote"), "use one of"),
        (dict(rlce_tests_per_direction=0), "set it to 1 or more"),
        (dict(rlce_tie_break_tests_per_direction=-1), "0 disables tie-breaking"),
        (dict(rlce_construction_temperature=0.0), "tests are sampled"),
        # built in Python, as the command line refuses them (issue 43): before any model loads
        (dict(learning_rate=0.0), "learning_rate 0: a learning rate must be > 0"),
        (dict(max_steps=0), "max_steps 0 trains nothing"),
        (dict(max_steps=-1, num_train_epochs=0), "num_train_epochs 0 trains nothing"),
    ],
)
def test_invalid_settings_name_the_fix(overrides, fix):
    with pytest.raises(ValueError, match=fix):
        RLCEGRPOConfig(**CPU, **overrides)


def test_an_output_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(ValueError, match="output_dir '.*taken' is a file: pass a folder"):
        RLCEGRPOConfig(**{**CPU, "output_dir": str(tmp_path / "taken")})


def test_defaults_are_the_papers():
    args = RLCEGRPOConfig(**CPU, per_device_train_batch_size=8)
    settings = args.evidence_settings()
    assert (args.rlce_verified_weight, args.rlce_format_weight) == (0.8, 0.2)
    assert settings.mode == "evolving" and settings.tests_per_direction == 1
    s = settings.construction_sampling
    assert (s.temperature, s.top_p, s.top_k) == (1.0, 0.95, 20)


def test_every_field_has_help():
    from dataclasses import fields

    from trl import GRPOConfig

    ours = {f.name for f in fields(RLCEGRPOConfig)} - {f.name for f in fields(GRPOConfig)}
    assert ours and all(f.metadata.get("help") for f in fields(RLCEGRPOConfig) if f.name in ours)


def _groups(text: str, header: str, name: str) -> dict[str, list[str]]:
    """`{group title: the names under it}`: a group starts at a line matching `header`, a name is a `name` line."""
    groups: dict[str, list[str]] = {}
    for line in text.splitlines():
        if title := re.match(header, line):
            groups[title.group(1)] = []
        elif groups and (found := re.match(name, line)):
            groups[list(groups)[-1]].append(found.group(1))
    return groups


def test_the_config_reads_like_trls():
    """TRL's layout: one `Parameters:` block whose `> Parameters that control ...` groups are the class body's
    `# Parameters that control ...` comments, the same fields under each, in the order of the dataclass's fields."""
    from dataclasses import fields

    from trl import GRPOConfig

    doc = RLCEGRPOConfig.__doc__
    assert doc.count("Parameters:") == 1
    documented = _groups(doc, r" {8}> (Parameters that control .+)$", r" {8}(\w+) \(`")
    declared = _groups(inspect.getsource(RLCEGRPOConfig), r" {4}# (Parameters that control .+)$",
                       r" {4,8}(\w+): .+ = field\(")
    assert len(documented) >= 5 and documented == declared
    trl_fields = {f.name for f in fields(GRPOConfig)}
    ours = [f.name for f in fields(RLCEGRPOConfig) if f.name not in trl_fields]
    in_order = [name for names in documented.values() for name in names]
    assert [name for name in in_order if name not in trl_fields] == ours  # TrainingArguments' own on transformers 5.25


def test_choice_lists_are_the_ones_the_code_checks():
    from dataclasses import fields

    from trl import GRPOConfig

    from rlce_trl.data.media import VIDEO_INPUTS
    from rlce_trl.evidence.state import MODES
    from rlce_trl.evidence.validation import REDACTION_MODES

    trl_fields = {f.name for f in fields(GRPOConfig)}
    choices = {f.name: f.metadata["choices"] for f in fields(RLCEGRPOConfig)
               if "choices" in f.metadata and f.name not in trl_fields}
    assert choices == {"verifier_mode": ["transformers", "server", "colocate"], "rlce_mode": list(MODES),
                       "rlce_redaction": list(REDACTION_MODES), "video_input": list(VIDEO_INPUTS),
                       "partner_mode": ["transformers", "server"]}
    with pytest.raises(ValueError, match="rlce_redaction='stems': use one of answers, inflections"):
        RLCEGRPOConfig(**CPU, rlce_redaction="stems")
    with pytest.raises(ValueError, match="partner_mode='remote': use one of transformers, server"):
        RLCEGRPOConfig(**CPU, partner_mode="remote")


def test_pickled_config_keeps_no_credentials():
    import pickle

    args = RLCEGRPOConfig(**CPU, per_device_train_batch_size=8, hub_token="hf_abcdefghijklmnop",
                          verifier_mode="server", verifier_server_base_url="http://user:s3cret@v0:8000/v1?key=k,http://v1:8000")
    restored = pickle.loads(pickle.dumps(args))
    assert restored.hub_token is None
    assert restored.verifier_server_base_url == "http://v0:8000/v1,http://v1:8000"
    assert args.hub_token == "hf_abcdefghijklmnop"  # the live object is untouched


def test_vllm_only_sampling_parameters_are_not_dropped_silently(tmp_path):
    import warnings

    from rlce_trl import RLCEGRPOConfig

    common = dict(output_dir=str(tmp_path), bf16=False, use_cpu=True, report_to="none")
    with pytest.warns(UserWarning, match="presence_penalty=1.5: vLLM sampling parameters, ignored by transformers"):
        RLCEGRPOConfig(**common, use_vllm=False, generation_kwargs={"presence_penalty": 1.5})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        RLCEGRPOConfig(**common, use_vllm=False, generation_kwargs={"presence_penalty": 0.0})
        RLCEGRPOConfig(**common, use_vllm=False)
