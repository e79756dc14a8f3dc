"""RLAC (D.6): every reward against hand-computed values under the implemented reading, the no-verdict rules,
meta-verification, and one batched call per stage (ScriptedVerifier is a FAKE backend: the test scripts its
replies)."""

import pytest
from fakes import ScriptedVerifier

from rlce_trl.methods import build_scorer
from rlce_trl.methods.rlac import (
    GENERATOR_INSTRUCTION,
    Critique,
    Exchange,
    RLACGeneratorScorer,
    critic_reward,
    critic_rows,
    generator_format,
    generator_rewards,
    generator_rows,
    meta_shortcut,
    parse_critique,
    pick_clips,
)
from rlce_trl.scoring import Group

WELL = "<answer>Take the ferry</answer><justification>The user likes boats. Ferries are cheap.</justification>"
BAD = "Take the ferry, the user likes boats."


def test_generator_format():
    assert generator_format(WELL)
    assert generator_format("  <answer>x</answer>\n<justification>y</justification>\n")
    assert not generator_format(BAD)
    assert not generator_format("<answer></answer><justification>y</justification>")
    assert not generator_format("<justification>y</justification><answer>x</answer>")
    assert not generator_format(WELL + " extra")


def test_parse_critique():
    c = parse_critique('SPAN: "the user likes boats"\nCLAIM: The user likes boats.\nWHY: They get seasick.')
    assert c == Critique("the user likes boats", "The user likes boats.", "They get seasick.", True)
    rambling = parse_critique("Sure!\n**SPAN:** likes boats\nCLAIM: likes boats")
    assert rambling.span == "likes boats" and not rambling.well_formed  # parseable, but not the format
    assert parse_critique("CLAIM: something") is None  # no span: no verdict possible
    assert parse_critique("") is None


def test_meta_shortcut():
    response = "The user, who LOVES boats, should take the \u201cferry\u201d."
    assert meta_shortcut(Critique("who loves boats", "loves boats", "", True), response) is True  # exact, no call
    assert meta_shortcut(Critique("hates planes", "hates planes", "", True), response) is False  # not a quote
    assert meta_shortcut(Critique('take the "ferry"', "The ferry is best", "", True), response) is None  # paraphrase?


@pytest.mark.parametrize("u, fmt, expected", [(True, True, 0.2), (True, False, 0.0), (False, True, 1.0),
                                              (False, False, 0.8)])
def test_generator_reward_table(u, fmt, expected):
    # r_G = 0.8 (1 - 1[u]) + 0.2 1[fmt_G]: a well-formed loser (0.2) scores above a malformed loser (0.0)
    ex = Exchange("ctx", WELL if fmt else BAD, "", u=u)
    assert generator_rewards([ex]) == [pytest.approx(expected)]


@pytest.mark.parametrize("u, fmt, expected", [(True, True, 1.0), (True, False, 0.8), (False, True, 0.2),
                                              (False, False, 0.0), (None, True, 0.0)])
def test_critic_reward_table(u, fmt, expected):
    ex = Exchange("ctx", "resp", "", critique=Critique("s", "c", "w", fmt), u=u)
    assert critic_reward(ex) == pytest.approx(expected)


def test_no_verdict_gets_group_mean_so_advantage_is_zero():
    exchanges = [Exchange("c", WELL, "", u=False), Exchange("c", BAD, "", u=True), Exchange("c", WELL, "", u=None)]
    rewards = generator_rewards(exchanges)
    assert rewards == [pytest.approx(1.0), pytest.approx(0.0), pytest.approx(0.5)]
    assert rewards[2] - sum(rewards) / 3 == pytest.approx(0.0)
    assert generator_rewards([Exchange("c", WELL, "", u=None)] * 2) == [None, None]


CONTEXT = "User: I get seasick.\n\nUser: How do I get between the islands?"


def scripted(critic: dict, meta: dict, validate: dict):
    """Critic reply by response, meta reply by claim, validator reply by claim."""

    def reply(request):
        text = request.messages[-1]["content"]
        if request.stage == "rlac_critic":
            return next(v for k, v in critic.items() if k in text)
        claim = text.split("Claim: " if request.stage == "rlac_meta" else "Statement: ")[1].split("\n")[0]
        assert "Response to check" not in text and "critic" not in text.lower()  # never the response, no critic
        return (meta if request.stage == "rlac_meta" else validate)[claim]

    return ScriptedVerifier(reply)


def test_generator_scorer_one_batched_call_per_stage():
    responses = [
        "<answer>Fly</answer><justification>Flights avoid boats.</justification>",  # exact quote, validator: no -> u
        "<answer>Ferry</answer><justification>The user loves boats.</justification>",  # paraphrase yes, validated yes
        "Take the ferry.",  # critic quotes text not in the response: meta rejects, no call
        "<answer>Ferry</answer><justification>Cheap.</justification>",  # critic unparseable: no verdict
    ]
    critic = {
        "Flights avoid boats": "SPAN: Flights avoid boats\nCLAIM: Flights avoid boats\nWHY: w",
        "loves boats": "SPAN: The user loves boats\nCLAIM: The user enjoys being on boats\nWHY: w",
        "Take the ferry.": "SPAN: ferries are fast\nCLAIM: ferries are fast\nWHY: w",
        "Cheap.": "I cannot find anything.",
    }
    partner = scripted(critic, {}, {})
    verifier = scripted({}, {"The user enjoys being on boats": "Yes"},
                        {"Flights avoid boats": "No", "The user enjoys being on boats": "Yes"})
    scorer = build_scorer("rlac_generator", verifier, partner=partner)
    (result,), stats = scorer.score([Group(CONTEXT, responses)])
    assert [len(b) for b in partner.batches] == [4] and all(r.stage == "rlac_critic" for r in partner.batches[0])
    assert [r.sampling.temperature for r in partner.batches[0]] == [1.2] * 4  # Table 15's proposal temperature
    assert [[r.stage for r in b] for b in verifier.batches] == [["rlac_meta"], ["rlac_validate"] * 2]
    assert verifier.batches[1][0].sampling.temperature == 0 and verifier.batches[1][0].sampling.max_tokens == 256
    decided = [1.0 * 0 + 0.2, 0.8 + 0.2, 0.8 + 0.0]  # u; survived + ruled supported; meta-rejected (malformed)
    mean = sum(decided) / 3
    assert result.verified == [pytest.approx(v) for v in [*decided, mean]]
    assert stats.extra["meta_exact"] == 1 and stats.extra["meta_paraphrase_checks"] == 1
    assert stats.extra["meta_rejected"] == 1 and stats.extra["no_verdict"] == 1
    assert stats.verdicts == {"unsupported": 1, "supported": 1}


def test_generator_scorer_without_partner_uses_the_verifier():
    verifier = scripted({"Fly": "SPAN: Fly\nCLAIM: Fly\nWHY: w"}, {}, {"Fly": "maybe"})
    scorer = RLACGeneratorScorer(verifier)
    (result,), stats = scorer.score([Group(CONTEXT, ["<answer>Fly</answer><justification>x</justification>"] * 2)])
    assert [b[0].stage for b in verifier.batches] == ["rlac_critic", "rlac_validate"]  # no paraphrase: no meta call
    assert result.verified == [None, None] and result.status == "no_verdict"  # validator unreadable everywhere
    assert stats.verdict_failures["validator_unreadable"] == 2


def test_critic_scorer_rewards_and_columns():
    response = "<answer>Ferry</answer><justification>The user loves boats.</justification>"
    critiques = [
        "SPAN: The user loves boats\nCLAIM: The user loves boats\nWHY: seasick",  # u, well formed: 1.0
        "SPAN: The user loves boats\nCLAIM: The user loves boats",  # u, no WHY line: 0.8
        "SPAN: the user hates planes\nCLAIM: the user hates planes\nWHY: w",  # injected quote: 0.2
        "nothing to say",  # no verdict: 0
    ]
    verifier = scripted({}, {}, {"The user loves boats": "No"})
    scorer = build_scorer("rlac_critic", verifier)
    assert scorer.columns == ("rlac_response", "rlac_context")
    group = Group("critic prompt", critiques, columns={"rlac_response": response, "rlac_context": CONTEXT})
    (result,), _ = scorer.score([group])
    assert result.verified == [pytest.approx(v) for v in (1.0, 0.8, 0.2, 0.0)]
    assert [[r.stage for r in b] for b in verifier.batches] == [["rlac_validate"] * 2]  # meta had nothing to check
    assert CONTEXT in verifier.batches[0][0].messages[-1]["content"]
    with pytest.raises(ValueError, match="rlac_response and rlac_context"):
        scorer.score([Group("critic prompt", critiques)])


def test_partner_only_reaches_scorers_that_take_it():
    verifier = ScriptedVerifier(lambda r: "Yes")
    assert build_scorer("rlac_generator", verifier, partner="P").partner == "P"
    assert build_scorer("ttrl", verifier, partner=ScriptedVerifier(lambda r: "")).name == "ttrl"  # not passed


def test_data_between_phases():
    rows = [{"id": f"r{i}", "prompt": [{"role": "system", "content": "Solve."}, {"role": "user", "content": f"Q{i}"}],
             "question": f"Q{i}", "gold": "secret"} for i in range(5)]
    built = generator_rows(rows)
    assert built[0]["prompt"][0]["content"].endswith(GENERATOR_INSTRUCTION) and "gold" not in built[0]
    picked = pick_clips(built, 3, seed=0)
    assert len(picked) == 3 and len({r["id"] for r in picked}) == 3 and pick_clips(built, 3, seed=0) == picked
    pairs = critic_rows(picked, ["resp A", "resp B", "resp C"])
    assert [p["rlac_response"] for p in pairs] == ["resp A", "resp B", "resp C"]
    assert pairs[0]["rlac_context"] == f"User: {picked[0]['question']}"  # system prompt (instruction) left out
    assert "resp A" in pairs[0]["prompt"][1]["content"] and "SPAN:" in pairs[0]["prompt"][0]["content"]
