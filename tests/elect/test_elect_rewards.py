"""Elect training rewards (paper §4.1, §5.1): algebra, parsing, the TRL contract, and GRPO runs on a tiny model."""

import math

import pytest
from datasets import Dataset

from rlce_trl.elect import ElectRewardConfig, make_elect_reward_funcs, parse_elect_output

NAMES = ["elect_accuracy", "elect_format", "elect_frame_sensitive", "elect_think_transparency",
         "elect_anti_repetition"]


def output(answer="B", frames="2, 4", think_words=544, order=("think", "keyframes", "answer")):
    fields = {"think": " ".join(f"w{i}" for i in range(think_words)), "keyframes": frames, "answer": answer}
    return "".join(f"<{t}>{fields[t]}</{t}>" for t in order)


def total(completion, **columns):
    funcs, weights = make_elect_reward_funcs(ElectRewardConfig())
    values = [f(prompts=[None], completions=[completion], **columns)[0] for f in funcs]
    return sum(w * (v or 0.0) for w, v in zip(weights, values, strict=True)), values


def test_names_weights_and_range():
    funcs, weights = make_elect_reward_funcs()
    assert [f.__name__ for f in funcs] == NAMES and weights == [0.1, 0.1, 0.2, 0.3, 0.3]
    assert math.isclose(sum(weights), 1.0)
    best, values = total(output(frames="1,2,3,4,5,6,7,8"), solution=["B"], num_frames=[8], answer_options=[["A", "B"]])
    assert values == pytest.approx([1.0, 1.0, 8 / 9, 1.0, 0.0])
    assert best == pytest.approx(0.1 + 0.1 + 0.2 * 8 / 9 + 0.3) and best < 0.7
    worst, _ = total("<think>" + "x y z " * 200 + "</think>", solution=["B"], num_frames=[8])
    assert worst >= -0.3 and worst == pytest.approx(-0.3 * (1 - 3 / 598))


@pytest.mark.parametrize("frames,think,format_ok", [("2,4", 544, True), ("", 544, False), ("2, 4, 4, 99", 304, True)])
def test_correct_minus_wrong_gap_is_the_paper_algebra(frames, think, format_ok):
    columns = {"num_frames": [8], "answer_options": [["A", "B"]], "solution": ["B"]}
    right, _ = total(output("B", frames, think), **columns)
    wrong, _ = total(output("A", frames, think), **columns)
    parse = parse_elect_output(output("B", frames, think), 8, ["A", "B"])
    s_fs = min(1, max(0, (len(parse.keyframes) - parse.invalid) / (1 + len(parse.keyframes))))
    tau = math.sin(math.pi * (min(max(think, 64), 1024) - 64) / 960) ** 2
    assert right - wrong == pytest.approx(0.1 + 0.2 * format_ok * s_fs + 0.3 * tau, abs=1e-9)


def test_parsing_any_order_missing_tags_duplicates_and_range():
    p = parse_elect_output(output(order=("answer", "keyframes", "think")), 8, ["A", "B"])
    assert p.format_ok and p.answer == "B" and p.keyframes == {2, 4}
    assert not parse_elect_output("<think>x</think><answer>B</answer>", 8).format_ok
    assert not parse_elect_output("<think></think><keyframes>1</keyframes><answer>B</answer>", 8).format_ok
    p = parse_elect_output("<keyframes>[3, 3, 0, 9, two, 5]</keyframes>", 8)
    assert p.keyframes == {3, 5} and p.invalid == 2  # 0 and 9 out of range; duplicate dropped; "two" ignored
    p = parse_elect_output("<keyframes>3, 3, two</keyframes>", 8, duplicates="invalid", non_integer="invalid")
    assert p.keyframes == {3} and p.invalid == 2
    assert parse_elect_output("<answer>\\boxed{b}</answer>", 8, ["A", "B"]).answer == "B"
    assert parse_elect_output("no tags, the answer is \\boxed{A}", 8, ["A", "B"]).answer == "A"  # fallback


def test_contract_conversational_none_on_text_rows_and_missing_gold():
    funcs, _ = make_elect_reward_funcs()
    by_name = {f.__name__: f for f in funcs}
    conv = [[{"role": "assistant", "content": output()}], [{"role": "assistant", "content": output("A")}]]
    cols = {"solution": ["B", None], "answer_options": [["A", "B"]] * 2}
    fs = by_name["elect_frame_sensitive"](prompts=[None, None], completions=conv, num_frames=[8, None], **cols)
    assert fs == [pytest.approx(2 / 3), None]  # second row: no frames and no gold
    assert by_name["elect_accuracy"](prompts=[None] * 2, completions=conv, **cols) == [1.0, None]
    assert by_name["elect_frame_sensitive"](prompts=[None], completions=conv[:1], solution=["B"]) == [None]
    assert by_name["elect_anti_repetition"](prompts=[None] * 2, completions=conv) == [0.0, 0.0]


def test_rlce_gate_reads_the_verified_answer_and_needs_the_trainer():
    funcs, _ = make_elect_reward_funcs(ElectRewardConfig(gate="rlce"))
    acc = funcs[0]
    outs = [output("A"), output("B"), output("B")]
    assert acc(prompts=[None] * 3, completions=outs, rlce_verified_answer=["b", "b", None]) == [0.0, 1.0, None]
    with pytest.raises(ValueError, match="RLCEGRPOTrainer"):
        acc(prompts=[None], completions=outs[:1])
    funcs, weights = make_elect_reward_funcs(ElectRewardConfig(gate="none"))
    assert [f.__name__ for f in funcs] == NAMES[1:] and weights == [0.1, 0.2, 0.3, 0.3]


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="gate='x'.*gold") as err:
        ElectRewardConfig(gate="x", think_range=(5, 1))
    assert "think_range" in str(err.value)


def test_stock_grpo_trainer_two_steps_logs_elect_rewards(tiny_model_dir, tmp_path):
    from testing_utils import preference_rows
    from trl import GRPOConfig, GRPOTrainer

    rows = [{**r, "solution": "positive", "num_frames": 4} for r in preference_rows(8)]
    funcs, weights = make_elect_reward_funcs()
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, max_steps=2, logging_steps=1, report_to="none", bf16=False,
                      use_cpu=True, gradient_checkpointing=False, save_strategy="no", reward_weights=weights)
    trainer = GRPOTrainer(model=tiny_model_dir, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows))
    trainer.train()
    logs = [e for e in trainer.state.log_history if "rewards/elect_format/mean" in e]
    assert len(logs) == 2
    for name in NAMES:
        assert f"rewards/{name}/mean" in logs[0]


def test_rlce_trainer_gate_is_one_for_winners_zero_for_losers_none_for_ties(tiny_model_dir, tmp_path):
    from fakes import evidence_verifier
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    seen = []
    funcs, _ = make_elect_reward_funcs(ElectRewardConfig(gate="rlce"))

    def recorder(prompts, completions, **kwargs):
        values = funcs[0](prompts, completions, **kwargs)
        seen.extend(zip(kwargs["rlce_answer"], kwargs["rlce_verified_answer"], values, strict=True))
        return values

    verifier = evidence_verifier({"positive>negative": "yes", "negative>positive": "no"})
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, reward_funcs=[recorder], verifier=verifier,
                              args=tiny_grpo_args(tmp_path, reward_weights=[0.1], rlce_redact_answers=False),
                              train_dataset=Dataset.from_list(preference_rows(16)))
    trainer.train()
    assert len(seen) == 32
    for answer, verified, value in seen:
        assert value == (None if verified is None else float(answer == verified))
    assert {v for *_, v in seen} == {1.0, 0.0, None}


def test_frame_count_from_the_prompt_video_block():
    funcs, _ = make_elect_reward_funcs()
    fs = {f.__name__: f for f in funcs}["elect_frame_sensitive"]
    video = [{"role": "user", "content": [{"type": "video", "video": ["f"] * 4}, {"type": "text", "text": "q?"}]}]
    meta = [{"role": "user", "content": [{"type": "video", "metadata": {"frames_indices": [0, 5]}}]}]
    text = [{"role": "user", "content": "q?"}]
    got = fs(prompts=[video, meta, text], completions=[output(frames="1, 4")] * 3, solution=["B"] * 3)
    assert got == [pytest.approx(2 / 3), pytest.approx(0.0), None]  # T=2: frame 4 is out of range -> (1-1)/2
