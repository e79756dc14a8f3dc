"""VisPlay's rewards, Questioner scorer and Reasoner data, with a scripted FAKE partner (tests/fakes.py)."""

import pytest
from fakes import ScriptedVerifier

from rlce_trl.data.sample import load_preference_sample
from rlce_trl.methods import visplay as vp
from rlce_trl.rewards import build_groups
from rlce_trl.scoring import Group

LABELS = ("positive", "negative", "neutral")


def block(q, kind="multiple choice", answer="yes"):
    return f"<type>{kind}</type>\n<question>{q}</question>\n<answer>{answer}</answer>"


# ------------------------------------------------------------------ pure pieces


def test_uncertainty_reward_peaks_at_half():
    assert vp.uncertainty_reward(0.5) == 0.5
    assert vp.uncertainty_reward(0.3) == pytest.approx(0.3) and vp.uncertainty_reward(0.8) == pytest.approx(0.2)
    assert vp.uncertainty_reward(1.0) == 0.0 and vp.uncertainty_reward(0.1) == pytest.approx(0.1)
    assert vp.uncertainty_reward(None) == -1.0
    assert vp.questioner_reward(0.5, 0.25) == 0.25 and vp.questioner_reward(None, 0.1) == pytest.approx(-1.1)


def test_votes_and_consistency_count_unboxed_answers_in_the_denominator():
    texts = ["\\boxed{A}", "\\boxed{ a }", "so \\boxed{B}", "no box", "\\boxed{}", "\\boxed{A} then \\boxed{B}"]
    votes = [vp.vote_key(t) for t in texts]
    assert votes == ["a", "a", "b", vp.NONE_ANSWER, None, "b"]
    assert vp.majority_vote(votes) == ("a", 2, 2)  # tie: the first answer given wins
    assert vp.consistency(votes) == pytest.approx(2 / 6)
    # the "None" placeholder is an answer like any other (mathruler's literal "None"): it can win
    assert vp.consistency([vp.NONE_ANSWER] * 7 + ["a"] * 3) == pytest.approx(0.7)
    # closed labels: a box that is not a label votes "None"
    assert vp.vote_key("\\boxed{Positive}", LABELS) == "positive" and vp.vote_key("\\boxed{happy}", LABELS) == "None"
    assert vp.majority_vote([None, None]) == (None, 0, 0) and vp.consistency([]) == 0.0


def test_boxed_helpers():
    assert vp.last_boxed("x \\boxed{a{b}c} y \\boxed{d}") == "d"
    assert vp.last_boxed("\\boxed{a{b}c}") == "a{b}c" and vp.last_boxed("\\boxed{open") is None
    assert vp.is_whole_boxed("  \\boxed{yes} \n") and vp.is_whole_boxed("\\boxed{a{b}}")
    assert not vp.is_whole_boxed("I think \\boxed{yes}") and not vp.is_whole_boxed("\\boxed{a} \\boxed{b}")
    assert not vp.is_whole_boxed("\\boxed{}") and not vp.is_whole_boxed("") and not vp.is_whole_boxed(None)


def test_parse_questioner_three_blocks():
    p = vp.parse_questioner("Sure!\n< type >open-ended</type><question> Why? </question>\n<answer>fun</answer> bye")
    assert p == vp.ProposedQuestion("open-ended", "Why?", "fun")
    for bad in ["", "no tags", block("", answer="x"), "<type>t</type><question>q</question>", block("q", answer=""),
                "<answer>a</answer><question>q</question><type>t</type>", None]:
        assert vp.parse_questioner(bad) is None


def test_reasoner_reward():
    assert vp.reasoner_reward("\\boxed{Positive}", "positive", LABELS) == pytest.approx(1.0)
    assert vp.reasoner_reward("It is \\boxed{positive}.", "positive", LABELS) == pytest.approx(0.9)
    assert vp.reasoner_reward("\\boxed{negative}", "positive", LABELS) == pytest.approx(0.1)
    assert vp.reasoner_reward("no idea", "positive", LABELS) == 0.0
    assert vp.reasoner_reward("\\boxed{To save money.}", "to save money", None) == pytest.approx(1.0)


def test_retention_and_hard_drops():
    assert vp.retention_reason("Why?", "yes", 0.3) is None and vp.retention_reason("Why?", "yes", 0.8) is None
    assert vp.retention_reason("Why?", "yes", 0.2) == "too_hard"
    assert vp.retention_reason("Why?", "yes", 0.9) == "too_easy"
    assert vp.retention_reason("Why?", None, 0.5) == "no_valid_answer"
    assert vp.retention_reason("Why?", "None", 0.5) == "no_valid_answer"
    assert vp.retention_reason("What is in the box?", "a cat", 0.5) == "question_mentions_box"
    assert vp.retention_reason("Why?", "\\text{happy}", 0.5) == "answer_contains_text"
    # the literal reading (VisPlay's code) also drops "inbox" / "context"; the word reading does not
    assert vp.hard_drop("Did she check her inbox?", "the context") == "question_mentions_box"
    assert vp.hard_drop("Did she check her inbox?", "the context", match="word") is None
    assert vp.hard_drop("Why?", "\\text{yes}", match="word") == "answer_contains_text"


# ------------------------------------------------------------------ the Questioner scorer


def scripted_reasoner():
    """A FAKE frozen Reasoner: the question decides its m answers."""

    def reply(request):
        user = request.messages[-1]["content"]
        n = request.sampling.n
        if "HALF" in user:
            return ["\\boxed{yes}"] * (n // 2) + ["\\boxed{no}"] * (n - n // 2)
        if "EASY" in user:
            return "\\boxed{yes}"
        if "THIRDS" in user:
            return ["\\boxed{positive}"] * 7 + ["\\boxed{negative}"] * 3
        return "I would rather not say."  # no box: "None" x n

    return ScriptedVerifier(reply)


def questioner_groups():
    clip = load_preference_sample("train")[0]
    row = vp.questioner_row(clip)
    completions = [
        [block("Is the user HALF sure about boats?"), block("Is this EASY?"), "garbage", block("Is it NOBOX?")],
        [block("Is the user HALF sure about boats?"), block("Does the user like HALF measures?"), "", "<type>x"],
    ]
    return build_groups([row["prompt"]] * 8, sum(completions, []), None, 4), clip


def test_questioner_scorer_one_call_and_rewards():
    groups, clip = questioner_groups()
    partner = scripted_reasoner()
    verifier = ScriptedVerifier(lambda r: pytest.fail("the verifier is not the partner"))
    scorer = vp.VisPlayQuestionerScorer(verifier, None, partner=partner)
    results, stats = scorer.score(groups)
    assert len(partner.batches) == 1 and len(partner.batches[0]) == 5  # ONE call, one request per parsed question
    request = partner.batches[0][0]
    assert (request.sampling.n, request.sampling.temperature, request.sampling.top_p, request.sampling.top_k) == (
        10, 1.0, 1.0, 40)
    assert request.messages[0]["content"] == vp.SCORER_SYSTEM_PROMPT
    user = request.messages[1]["content"]
    assert "This is a question: Is the user HALF sure about boats?. The question type is: multiple choice." in user
    assert clip["question"] in user and vp.QUESTIONER_USER_PROMPT not in user  # the sample, not the instruction
    assert user.startswith("User: ") and "User: User:" not in user and "\n\nAssistant: " in user  # the conversation
    assert results[0].extra["r_unc"] == [0.5, 0.0, -1.0, 0.0]  # NOBOX: 10 x "None" -> c = 1
    assert results[1].extra["r_unc"] == [0.5, 0.5, -1.0, -1.0]
    assert stats.extra["unparsed"] == 3 and stats.tests_validated == 50

    results = scorer.finalize_batch(groups, results)
    # 8 rollouts: the two identical HALF questions cluster (2/8), every other rollout is a singleton (1/8)
    assert results[0].extra["r_div"] == [0.25, 0.125, 0.125, 0.125]
    assert results[0].verified == [0.25, -0.125, -1.125, -0.125]
    assert results[1].verified == [0.25, 0.375, -1.125, -1.125]
    assert scorer.finalize_batch(groups, results)[0].verified == [0.25, -0.125, -1.125, -0.125]  # idempotent


def test_questioner_scorer_uses_the_verifier_without_partner_and_survives_partner_errors():
    from rlce_trl.verifiers.base import Reply

    class FailingFake(ScriptedVerifier):
        def _generate(self, requests):
            self.batches.append(requests)
            return [Reply.failed(r.sampling.n, "down") for r in requests]

    groups, _ = questioner_groups()
    fake = FailingFake(None)
    scorer = vp.VisPlayQuestionerScorer(fake, None, m=3)
    results, stats = scorer.score(groups)
    assert len(fake.batches) == 1 and fake.batches[0][0].sampling.n == 3
    assert results[0].extra["r_unc"] == [None, None, -1.0, None]
    assert stats.verdict_failures["partner_error"] == 5
    results = scorer.finalize_batch(groups, results)
    assert results[0].verified[0] is None and results[0].verified[2] == -1.125
    with pytest.raises(ValueError, match="m=0"):
        vp.VisPlayQuestionerScorer(fake, None, m=0)
    results, stats = vp.VisPlayQuestionerScorer(ScriptedVerifier(lambda r: []), None).score(groups)  # no texts
    assert results[0].extra["r_unc"] == [None, None, -1.0, None] and stats.verdict_failures["partner_error"] == 5


def test_registered_as_reward_method():
    from rlce_trl.methods import build_scorer

    scorer = build_scorer("visplay_questioner", scripted_reasoner(), None, m=4, partner=None)
    assert scorer.name == "visplay_questioner" and scorer.sampling.n == 4


# ------------------------------------------------------------------ Reasoner data


def scripted_questioner(per_clip):
    """A FAKE frozen Questioner: `per_clip` candidate texts for every clip."""
    return ScriptedVerifier(lambda request: list(per_clip)[: request.sampling.n])


def test_build_reasoner_rows_counts_every_drop():
    clips = load_preference_sample("train")[:3]
    candidates = [block("Is the user HALF sure?"), block("Is this EASY?"), "junk", block("What is in the box HALF?"),
                  block("Is it NOBOX?"), block("Will THIRDS happen?"), "<type>a</type>", block("Another HALF one?")]
    questioner, reasoner = scripted_questioner(candidates), scripted_reasoner()
    rows, stats = vp.build_reasoner_rows(clips, questioner, reasoner, n_candidates=8, m=10, cap=None)
    assert len(questioner.batches) == 1 and len(questioner.batches[0]) == 3
    assert questioner.batches[0][0].sampling.n == 8
    assert len(reasoner.batches) == 1 and len(reasoner.batches[0]) == 18  # 6 parsed candidates x 3 clips
    assert reasoner.batches[0][0].sampling.n == 10 and reasoner.batches[0][0].sampling.top_k == 40
    # per clip: HALF x2 kept (c=0.5), THIRDS kept (0.7), EASY too easy, NOBOX no valid answer, box hard-dropped
    assert stats["generated"] == 24 and stats["parsed"] == 18 and stats["retained"] == 9
    assert stats["dropped"] == {"unparsed": 6, "too_easy": 3, "question_mentions_box": 3, "no_valid_answer": 3}
    assert stats["retained_fraction"] == pytest.approx(9 / 24)
    row = rows[0]
    assert row["pseudo_label"] == "yes" and row["pseudo_label_share"] == 0.5
    assert row["question"] == "Is the user HALF sure?" and "gold" not in row
    assert row["id"] == f"{clips[0]['id']}/q0" and len({r["id"] for r in rows}) == len(rows)
    assert row["prompt"][-1]["content"].endswith(vp.REASONER_INSTRUCTION)  # a text row: plain string content
    assert {r["pseudo_label"] for r in rows} == {"yes", "positive"}

    capped, stats = vp.build_reasoner_rows(clips, questioner, reasoner, m=10, cap=4, n_clips=2, seed=3)
    assert stats["clips"] == 2 and stats["retained"] == 4 and stats["dropped"]["over_cap"] == 2
    assert capped == vp.build_reasoner_rows(clips, questioner, reasoner, m=10, cap=4, n_clips=2, seed=3)[0]


def test_build_reasoner_rows_hostile_replies_never_crash():
    clips = load_preference_sample("train")[:2]
    questioner = scripted_questioner(["", "<type></type><question>", "\\boxed{", block("HALF?")])
    rows, stats = vp.build_reasoner_rows(clips, questioner, scripted_reasoner(), n_candidates=6, m=4)
    # short replies are padded as unparsed: 5 of the 6 candidates per clip fail
    assert stats["dropped"]["unparsed"] == 10 and stats["retained"] == 2
    with pytest.raises(ValueError, match="hard_drop_match"):
        vp.build_reasoner_rows(clips, questioner, scripted_reasoner(), hard_drop_match="fuzzy")


def test_questioner_row_closed_labels():
    clip = {"id": "x", "task": "mosei", "answer_options": list(LABELS), "videos": ["a.mp4"], "gold": "positive",
            "prompt": [{"role": "system", "content": [{"type": "text", "text": "S"}]},
                       {"role": "user", "content": [{"type": "video", "text": None}, {"type": "text", "text": "Hi"}]}]}
    row = vp.questioner_row(clip)
    assert "gold" not in row and row["answer_options"] == list(LABELS)
    assert row["prompt"][1]["content"][0] == {"type": "video", "text": None}
    assert row["prompt"][1]["content"][1]["text"] == f"Hi\n\n{vp.QUESTIONER_USER_PROMPT}"  # a single turn: bare text
    assert "exactly one of: positive, negative, neutral" in row["prompt"][0]["content"][0]["text"]
    assert "open-ended" not in row["prompt"][0]["content"][0]["text"]
    group = Group(context="User: Hi", completions=[], labels=LABELS)
    messages = vp.scorer_messages(group.context, vp.ProposedQuestion("multiple choice", "Q", "A"), LABELS)
    assert "Answer with exactly one of: positive, negative, neutral." in messages[1]["content"]


# ---------------------------------------------------------- inside the trainer (tiny real policy, fake partner)


@pytest.mark.slow
def test_questioner_and_reasoner_phases_in_the_trainer(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from testing_utils import preference_rows, tiny_grpo_args

    from rlce_trl import RLCEGRPOTrainer

    fake = scripted_reasoner()
    clips = preference_rows(4, closed=False)
    args = tiny_grpo_args(tmp_path / "q", max_steps=1, reward_method="visplay_questioner",
                          reward_method_kwargs={"m": 2}, rlce_verified_weight=1.0, rlce_format_weight=0.0)
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, verifier=fake,
                              train_dataset=Dataset.from_list([vp.questioner_row(c) for c in clips]))
    trainer.train()
    log = trainer.state.log_history[0]
    # a random tiny policy never writes the three blocks: r_unc = -1 and every rollout is its own cluster (1/16),
    # so the batch hook ran on the whole step's batch
    assert log["rewards/visplay_questioner/mean"] == pytest.approx(-1 - 1 / 16)
    assert log["visplay_questioner/unparsed"] == 16

    questioner = ScriptedVerifier(lambda r: [block("the food HALF?", kind="open-ended")] * r.sampling.n)
    rows, stats = vp.build_reasoner_rows(clips, questioner, fake, n_candidates=1, m=4)
    assert stats["retained"] == 4 and {r["pseudo_label"] for r in rows} == {"yes"}
    args = tiny_grpo_args(tmp_path / "r", max_steps=1, reward_method="visplay_reasoner")  # the Reasoner's phase
    trainer = RLCEGRPOTrainer(model=tiny_model_dir, args=args, train_dataset=Dataset.from_list(rows))
    trainer.train()
    assert "rewards/visplay_reasoner/mean" in trainer.state.log_history[0]
