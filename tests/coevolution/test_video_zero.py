"""Video-Zero's rewards, Questioner scorer, Solver reward and Solver data, with a scripted FAKE partner."""

import pytest
from fakes import ScriptedVerifier

from rlce_trl.data.sample import load_preference_sample
from rlce_trl.methods import video_zero as vz
from rlce_trl.methods.lexicons import ACTION_CUES, TEMPORAL_CUES
from rlce_trl.rewards import build_groups
from rlce_trl.scoring import Group
from rlce_trl.verifiers.base import Reply

LABELS = ("positive", "negative")
CLIP = [{"type": "video", "source": {"path": "/clips/a.mp4"}, "metadata": {"duration": 30.0}}]


def tags(question, answer="positive", span="10 to 20 seconds", evidence="The speaker smiles, then laughs."):
    return (f"<span>{span}</span>\n<evidence>{evidence}</evidence>\n<question>{question}</question>\n"
            f"<answer>{answer}</answer>")


# ------------------------------------------------------------------ pure pieces


def test_lexicons_have_the_papers_sizes():
    assert len(set(ACTION_CUES)) == len(ACTION_CUES) == 31
    assert len(set(TEMPORAL_CUES)) == len(TEMPORAL_CUES) == 19


def test_learnability_triangles():
    assert vz.learnability(0.5) == 0.5 and vz.learnability(0.8) == pytest.approx(0.2)  # free text: min(c, 1-c)
    # K=2: zero at 1/2 and 1, peak 0.5 at 0.75
    assert vz.learnability(0.75, 2) == 0.5
    assert vz.learnability(0.5, 2) == 0.0 and vz.learnability(1.0, 2) == 0.0
    assert vz.learnability(0.625, 2) == pytest.approx(0.25) and vz.learnability(0.8, 2) == pytest.approx(0.4)
    # K=7: peak at (1 + 1/7) / 2 = 4/7 = 0.571, zero at 1/7 and 1
    assert vz.learnability(4 / 7, 7) == pytest.approx(0.5)
    assert vz.learnability(1 / 7, 7) == pytest.approx(0.0) and vz.learnability(1.0, 7) == pytest.approx(0.0)
    assert vz.learnability(0.3, 7) < vz.learnability(0.5, 7) < 0.5
    assert vz.learnability(0.1, 7) == 0.0 and vz.learnability(1.0, 1) == 0.0


def test_questioner_reward_weights_and_evidence_cap():
    assert vz.questioner_reward(1, 0.5, 0.6, 2.0) == pytest.approx(0.1 + 0.25 + 0.18 + 0.3)
    assert vz.questioner_reward(0, 0.0, 0.0, 0.1) == pytest.approx(0.1)
    assert vz.dependency(0.8, 0.4) == pytest.approx(0.4) and vz.dependency(0.2, 0.6) == 0.0


def test_evidence_terms():
    assert vz.span_score((10, 20), 30) == pytest.approx(1 - (1 / 3) / 0.9)
    assert vz.span_score((0, 28), 30) == 0.0  # covers >= 90% of the clip
    assert vz.span_score((25, 35), 30) == 0.0 and vz.span_score((20, 10), 30) == 0.0
    assert vz.span_score((1, 2), None) == 0.0 and vz.span_score(None, 30) == 0.0
    text = "The speaker smiles and then nods at the end; at the end she smiles."
    assert vz.lexicon_hits(text, ACTION_CUES) == 2 and vz.lexicon_hits(text, TEMPORAL_CUES) == 2
    assert vz.lexicon_hits("a smile", ACTION_CUES) == 0 and vz.lexicon_hits(None, ACTION_CUES) == 0
    assert vz.lexicon_hits("Athena", TEMPORAL_CUES) == 0  # "then" inside a word does not count
    assert vz.evidence_reward((10, 20), 30, text) == pytest.approx(1 - (1 / 3) / 0.9 + 1 + 1)
    assert vz.evidence_reward(None, 30, "he waves then") == pytest.approx(0.5 + 0.5)


def test_spans_parse_leniently():
    assert vz.parse_span("12 to 18 seconds") == (12.0, 18.0)
    assert vz.parse_span("[12, 18]") == (12.0, 18.0) and vz.parse_span("12-18") == (12.0, 18.0)
    assert vz.parse_span("0:12 - 1:05.5") == (12.0, 65.5) and vz.parse_span("from 3.5s to 7s") == (3.5, 7.0)
    for junk in ("soon", "5", "", None, "start-end"):
        assert vz.parse_span(junk) is None
    assert vz.solver_span("<span>2 to 4</span> \\boxed{x}") == (2.0, 4.0) and vz.solver_span("\\boxed{x}") is None


def test_alignment_and_solver_reward_by_hand():
    # T=30, target (10, 20), prediction (12, 18): IoU 6/10, both boundaries 2 s off -> (1 - 2/30)^2
    r_align = 0.6 * (1 - 2 / 30) ** 2
    assert vz.alignment((12, 18), (10, 20), 30) == pytest.approx(r_align) == pytest.approx(0.5226667, abs=1e-6)
    response = "<span>12 to 18 seconds</span> \\boxed{positive}"
    assert vz.solver_reward(response, "positive", (10, 20), 30, LABELS) == pytest.approx(1 + 0.5 * r_align)
    assert vz.solver_reward(response.replace("positive", "negative"), "positive", (10, 20), 30, LABELS) == 0.0
    # strict scoring: invalid spans earn the base reward only
    assert vz.solver_reward("<span>18-12</span> \\boxed{positive}", "positive", (10, 20), 30, LABELS) == 1.0
    assert vz.solver_reward("<span>25-35</span> \\boxed{positive}", "positive", (10, 20), 30, LABELS) == 1.0
    assert vz.solver_reward(response, "positive", None, 30, LABELS) == 1.0
    assert vz.solver_reward(response, "positive", (10, 40), 30, LABELS) == 1.0
    assert vz.alignment((10, 20), (10, 20), 30) == 1.0 and vz.alignment((0, 5), (10, 20), 30) == 0.0
    # free text: normalised answers
    assert vz.solver_reward("\\boxed{To relax.}", "to relax", None, None, None) == 1.0


def test_retention_bounds():
    assert vz.retention_floor(None) == 0.3
    assert vz.retention_floor(2) == 0.6 and vz.retention_floor(7) == pytest.approx(0.342857, abs=1e-6)
    assert vz.retention_reason("a", 6, 4, 10, 2) is None  # c = 0.6, lead 2
    assert vz.retention_reason("a", 5, 5, 10, 2) == "too_hard"  # c = 0.5 < 0.6
    assert vz.retention_reason("a", 9, 1, 10, 2) == "too_easy"
    assert vz.retention_reason("a", 4, 2, 10, 7) is None  # c = 0.4 >= 0.343, lead 2
    assert vz.retention_reason("a", 4, 3, 10, 7) == "close_vote"  # lead 1
    assert vz.retention_reason("a", 3, 1, 10, 7) == "too_hard"  # 0.3 < 0.343
    assert vz.retention_reason("a", 3, 3, 10, None) is None  # free text: 0.3..0.8, no vote margin
    assert vz.retention_reason("a", 2, 1, 10, None) == "too_hard" and vz.retention_reason(None, 0, 0, 10) == (
        "no_valid_answer")


def test_target_span_median_and_fallback():
    agreeing = [(10, 20), (12, 22), (11, 30), None, (40, 50)]
    assert vz.target_span(agreeing, 30, (1, 5)) == ((11, 22), "solver")
    assert vz.target_span([None, (40, 50)], 30, (1, 5)) == ((1.0, 5.0), "questioner")
    assert vz.target_span([None], 30, (5, 1)) == (None, "none") and vz.target_span([(1, 2)], None) == (None, "none")


def test_format():
    video = vz.parse_vz_questioner(tags("Why?"))
    text = vz.parse_vz_questioner("<question>Q</question><answer>A</answer>")
    assert video.span == (10.0, 20.0) and video.evidence.startswith("The speaker")
    assert vz.format_ok(video, True, LABELS) and not vz.format_ok(text, True) and vz.format_ok(text, False)
    assert not vz.format_ok(vz.parse_vz_questioner(tags("Why?", answer="happy")), True, LABELS)
    assert not vz.format_ok(vz.parse_vz_questioner(tags("Why?", span="soon")), True)


# ------------------------------------------------------------------ the Questioner scorer


def scripted_solver():
    """A FAKE frozen Solver: the question (and whether the clip is shown) decides its answers."""

    def reply(request):
        text = request.messages[-1]["content"]
        blind = text.startswith(vz.BLIND_PREFIX)
        if "Q-A" in text:
            return ["\\boxed{positive}"] * (2 if blind else 4) + ["\\boxed{negative}"] * (3 if blind else 1)
        if "Q-C" in text:
            return ["\\boxed{by train}"] * (1 if blind else 3) + ["\\boxed{by bus}"] * (4 if blind else 2)
        return "\\boxed{positive}"

    return ScriptedVerifier(reply)


def test_questioner_scorer_one_call_and_rewards():
    video_group = Group(context=f"User: Transcript: hi\n\n{vz.QUESTIONER_USER_PROMPT}", labels=LABELS, media=CLIP,
                        completions=[tags("Q-A"), tags("Q-B", answer="happy", span="none"), "garbage"])
    sample = vz.questioner_row(load_preference_sample("train")[0])
    assert "<span>" not in sample["prompt"][0]["content"]  # text-only template (plain strings): two tags
    (text_group,) = build_groups([sample["prompt"]] * 2, ["<question>Q-C</question><answer>By train.</answer>",
                                                          "<question>Q-C</question>"], None, 2)
    partner = scripted_solver()
    scorer = vz.VZQuestionerScorer(ScriptedVerifier(lambda r: pytest.fail("not the partner")), None, partner=partner)
    results, stats = scorer.score([video_group, text_group])
    assert len(partner.batches) == 1  # ONE call for both kinds of answers
    batch = partner.batches[0]
    assert [r.stage for r in batch] == ["vz_with", "vz_blind"] * 4
    assert all(r.sampling.n == 5 and r.sampling.temperature == 1.0 for r in batch)
    assert batch[0].media == CLIP and batch[1].media is None
    assert "Transcript: hi" in batch[0].messages[-1]["content"] and "<span>" in batch[0].messages[-1]["content"]
    assert "Transcript: hi" not in batch[1].messages[-1]["content"]  # blind: no transcript
    assert vz.QUESTIONER_USER_PROMPT not in batch[0].messages[-1]["content"]
    assert "<span>" not in batch[4].messages[-1]["content"]  # text-only Solver: no grounding tag
    # Q-A: c = 0.8 -> K=2 triangle 0.4; p_with 0.8, p_without 0.4 -> dep 0.4; evidence capped at 0.3
    assert results[0].verified[0] == pytest.approx(0.1 + 0.5 * 0.4 + 0.3 * 0.4 + 0.3)
    # Q-B: answer not a label (format 0), c = 1 (learn 0), no span, evidence text still has cues: min(1.0 + 0.5, .3)
    assert results[0].verified[1] == pytest.approx(0.3)
    assert results[0].verified[2] == 0.0 and stats.extra["unparsed"] == 1
    # Q-C (text): c = 3/5 -> 0.4; p_with 0.6, p_without 0.2 -> dep 0.4; no evidence term on text
    assert results[1].verified[0] == pytest.approx(0.1 + 0.5 * 0.4 + 0.3 * 0.4)
    assert results[1].verified[1] == pytest.approx(0.5 * 0.4)  # no answer tag: format 0, own answer matches nothing
    assert scorer.finalize_batch([video_group, text_group], results) is results


def test_questioner_scorer_partner_failure_and_registry():
    from rlce_trl.methods import build_scorer

    class DownFake(ScriptedVerifier):
        def _generate(self, requests):
            self.batches.append(requests)
            return [Reply.failed(r.sampling.n, "down") for r in requests]

    group = Group(context=vz.QUESTIONER_USER_PROMPT, completions=[tags("Q-A"), "x"], labels=LABELS, media=CLIP)
    scorer = build_scorer("vz_questioner", DownFake(None), None, m=3, m_blind=2)
    results, stats = scorer.score([group])
    assert scorer.name == "vz_questioner" and [r.sampling.n for r in scorer.partner.batches[0]] == [3, 2]
    assert results[0].verified == [None, 0.0] and stats.verdict_failures["partner_error"] == 1
    with pytest.raises(ValueError, match="m_blind=0"):
        vz.VZQuestionerScorer(DownFake(None), m_blind=0)
    # a backend that answers with no text at all (no error set) is a failure too, never a division by zero
    empty = ScriptedVerifier(lambda r: [])
    results, stats = vz.VZQuestionerScorer(empty).score([group])
    assert results[0].verified == [None, 0.0] and stats.verdict_failures["partner_error"] == 1


# ------------------------------------------------------------------ Solver reward function and data


def clip_row(k, marker):
    return {"id": f"clip/{k}", "task": "urfunny", "answer_options": list(LABELS), "videos": ["a.mp4"],
            "prompt": [{"role": "user", "content": [*CLIP, {"type": "text", "text": f"Transcript {marker}"}]}]}


def test_build_solver_rows_retention_spans_and_drops():
    def questioner(request):
        text = request.messages[-1]["content"]
        marker = next(m for m in ("KEEP1", "KEEP2", "EASY", "HARD", "JUNK") if m in text)
        return "no tags at all" if marker == "JUNK" else tags(f"{marker}?", span="1 to 5")

    def solver(request):
        text = request.messages[-1]["content"]
        if "KEEP1?" in text:
            return ["<span>10-20</span>\\boxed{positive}"] * 3 + ["<span>12-22</span>\\boxed{positive}"] * 3 + [
                "\\boxed{negative}"] * 4
        if "KEEP2?" in text:
            return ["<span>junk</span>\\boxed{negative}"] * 7 + ["\\boxed{positive}"] * 3
        if "EASY?" in text:
            return "\\boxed{positive}"
        return ["\\boxed{positive}"] * 5 + ["I cannot tell."] * 5  # HARD: c = 0.5 < 0.6

    clips = [clip_row(k, m) for k, m in enumerate(("KEEP1", "KEEP2", "EASY", "HARD", "JUNK"))]
    q_fake, s_fake = ScriptedVerifier(questioner), ScriptedVerifier(solver)
    rows, stats = vz.build_solver_rows(clips, q_fake, s_fake)
    assert len(q_fake.batches) == 1 and len(q_fake.batches[0]) == 5 and q_fake.batches[0][0].sampling.n == 1
    assert len(s_fake.batches) == 1 and len(s_fake.batches[0]) == 4 and s_fake.batches[0][0].sampling.n == 10
    assert s_fake.batches[0][0].media == CLIP
    assert stats["dropped"] == {"unparsed": 1, "too_easy": 1, "too_hard": 1}
    assert stats["retained"] == 2 and stats["retained_fraction"] == pytest.approx(0.4)
    assert stats["span_source"] == {"solver": 1, "questioner": 1}
    first, second = rows
    assert (first["pseudo_label"], first["target_span"], first["clip_seconds"]) == ("positive", [11.0, 21.0], 30.0)
    assert (second["pseudo_label"], second["target_span"]) == ("negative", [1.0, 5.0])
    assert first["pseudo_label_share"] == 0.6 and first["question"] == "KEEP1?" and "gold" not in first
    text = first["prompt"][-1]["content"][-1]["text"]
    assert "Answer with exactly one of: positive, negative." in text and "<span>" in text


def test_build_solver_rows_hostile_replies_never_crash():
    class Broken(ScriptedVerifier):
        def _generate(self, requests):
            self.batches.append(requests)
            return [Reply.failed(r.sampling.n, "boom") if k % 2 else Reply(texts=[], finish_reasons=[])
                    for k, r in enumerate(requests)]

    clips = load_preference_sample("train")[:4]
    rows, stats = vz.build_solver_rows(clips, Broken(None), Broken(None))
    assert rows == [] and stats["dropped"] == {"questioner_error": 2, "unparsed": 2} and stats["parsed"] == 0
    questioner = ScriptedVerifier(lambda r: "<question>Where to?</question><answer>Porto</answer>")
    rows, stats = vz.build_solver_rows(clips, questioner, Broken(None))
    assert rows == [] and stats["dropped"] == {"solver_error": 4}
    solver = ScriptedVerifier(lambda r: ["\\boxed{Porto}"] * 6 + ["x"] * 4)
    rows, stats = vz.build_solver_rows(clips, questioner, solver)
    assert stats["retained"] == 4 and rows[0]["pseudo_label"] == "Porto" and rows[0]["target_span"] is None
    assert "<span>" not in rows[0]["prompt"][-1]["content"] and stats["span_source"] == {"none": 4}


def test_builders_reject_bad_inputs_with_one_line_errors():
    from rlce_trl.errors import InputError
    from rlce_trl.methods import visplay as vp

    fake = ScriptedVerifier(lambda r: pytest.fail("no call before the inputs are checked"))
    with pytest.raises(InputError, match=r"build_solver_rows: clip_rows has 1 unusable row.*row 1: no `prompt`"):
        vz.build_solver_rows([clip_row(0, "A"), {"id": "x"}], fake, fake)
    with pytest.raises(ValueError, match="m=0 must be a whole number"):
        vz.build_solver_rows([clip_row(0, "A")], fake, fake, m=0)
    with pytest.raises(ValueError, match="lo=0.9, hi=0.8"):
        vp.build_reasoner_rows([clip_row(0, "A")], fake, fake, lo=0.9)
    with pytest.raises(ValueError, match="n_candidates=-1"):
        vp.build_reasoner_rows([clip_row(0, "A")], fake, fake, n_candidates=-1)
