"""trackio, TRL's recommended tracker: the evidence behind the rewards while the run trains (docs/trackio.md).

transformers' own `TrackioCallback` sends the metrics and TRL the completions table; [`TrackioEvidence`] adds what
only this package has: up to `rlce_trackio_groups` rollout groups per logged step as `trackio.Trace`s (one span per
verifier call, built from the evidence-trail records of `rlce_trl.audit`, nothing recomputed), the health alarms as
trackio alerts, and the Space's badge and tags on the model card. Everything sent goes through the credential
scrubber (`rlce_trl.credentials`); trackio is imported only once a run asks for it.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from pathlib import Path

from transformers import TrainerCallback

from .credentials import scrub, scrub_value

logger = logging.getLogger(__name__)

#: The trackio key of a step's traces, per mode.
TRACE_KEYS = {"train": "train/evidence", "eval": "eval/evidence"}
#: Characters of an answer in a span's name (the whole answer is in the span's input).
NAME_CHARS = 40
#: Characters of the prompt's end in the trace's user message, the dashboard's "request" (the whole prompt, as the
#: trail keeps it, is the input of the group's span).
REQUEST_CHARS = 300
#: trackio's badge, as TRL's model card template writes it.
BADGE = ('[<img src="https://raw.githubusercontent.com/gradio-app/trackio/refs/heads/main/trackio/assets/badge.png" '
         'alt="Visualize in Trackio" title="Visualize in Trackio" width="150" height="24"/>]({url})')


def _short(text, limit: int = NAME_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _answer(record: dict, index) -> str | None:
    answers = record.get("answers") or []
    return answers[index] if isinstance(index, int) and 0 <= index < len(answers) else None


def _messages(record: dict) -> list[dict]:
    """The prompt, a one-line outcome (the dashboard's preview), then each distinct answer with its rollouts and
    score."""
    answers, scores = record.get("answers") or [], record.get("scores") or []
    rollouts: dict[int, list[int]] = {}
    for rollout, answer in enumerate(record.get("assignment") or []):
        if answer is not None:
            rollouts.setdefault(answer, []).append(rollout)
    winner = record.get("winner")
    if winner is not None:
        outcome = f"verified answer: {_answer(record, winner)} ({record.get('status')})"
    else:
        outcome = f"no verified answer ({record.get('status')}); {len(answers)} distinct answers"
    context = record.get("context") or ""
    request = context if len(context) <= REQUEST_CHARS else "…" + context[-REQUEST_CHARS:]
    messages = [{"role": "user", "content": request}, {"role": "assistant", "content": outcome}]
    for i, answer in enumerate(answers):
        score = scores[i] if i < len(scores) else None
        shown = f"{score:.3f}" if isinstance(score, (int, float)) else "n/a"
        mark = " · verified" if i == winner else ""
        messages.append({"role": "assistant", "content": f"answer {i} (rollouts {rollouts.get(i, [])}, score "
                                                         f"{shown}{mark}): {answer}"})
    return messages


def _test_spans(record: dict) -> list[dict]:
    """One construction span per request (favoured answer, answer against, round) holding the tests it wrote, each
    with its validation span (the verdict)."""
    spans: list[dict] = []
    requests: dict[tuple, dict] = {}  # the construction span of each request
    for t, test in enumerate(record.get("tests") or []):
        key = (test.get("favoured"), test.get("against"), test.get("round", 0))
        if key not in requests:
            favoured, against = _answer(record, key[0]), _answer(record, key[1])
            name = f"construction: {_short(favoured)}" + (f" over {_short(against)}" if key[1] is not None else "")
            requests[key] = {"id": f"construction-{len(requests)}", "parent_id": "group", "kind": "generation",
                             "name": name + (" (tie-break)" if key[2] else ""),
                             "input": {"favoured": favoured, "against": against}, "output": [],
                             "metadata": {"favoured": key[0], "against": key[1], "round": key[2]}}
            spans.append(requests[key])
        requests[key]["output"].append(test.get("text"))
        # An unreadable verdict is an abstention of the method, not an error of the run: it is not marked as one
        # (trackio would then show the whole group as failed).
        verdict = test.get("verdict") or f"abstained ({test.get('failure') or 'no verdict'})"
        spans.append({"id": f"validation-{t}", "parent_id": requests[key]["id"], "kind": "generation",
                      "name": f"validation: {verdict}", "input": test.get("text"), "output": verdict,
                      "metadata": {"choice_logprobs": test.get("choice_logprobs"), "failure": test.get("failure")}})
    return spans


def evidence_trace(record: dict) -> dict:
    """The `trackio.Trace` arguments (`messages`, `metadata`, `spans`) of one evidence-trail group record
    (`rlce_trl.audit.group_record`), scrubbed of credentials."""
    answers = record.get("answers") or []
    labels = record.get("labels")
    scores = record.get("scores") or []
    by_answer = {a: (scores[i] if i < len(scores) else None) for i, a in enumerate(answers)}
    free_text = not labels
    spans = [
        {"id": "group", "kind": "span", "name": f"group {record.get('id')} ({record.get('method')})",
         "input": record.get("context"), "status": record.get("status"),
         "output": {"verified_answer": record.get("verified_answer"), "scores": by_answer,
                    "rewards": record.get("rewards")}},
        {"id": "equivalence", "parent_id": "group", "kind": "generation" if free_text else "span",
         "name": "equivalence" if free_text else "canonicalization (labels, no model call)",
         "input": {"completions": record.get("completions"), "labels": labels},
         "output": {"answers": answers, "assignment": record.get("assignment")}},
        *_test_spans(record),
        {"id": "aggregation", "parent_id": "group", "kind": "span", "name": "aggregation",
         "input": {"verdicts": [t.get("verdict") for t in record.get("tests") or []]},
         "output": {"scores": by_answer, "winner": record.get("winner"), "rewards": record.get("rewards")}},
    ]
    metadata = {"group": record.get("id"),
                **{key: record.get(key) for key in ("step", "mode", "method", "status", "verified_answer", "rewards")},
                "scores": by_answer, "assignment": record.get("assignment"), "tests": len(record.get("tests") or []),
                "tie_break_round": record.get("tie_break_round")}
    extra = {k: v for k, v in (record.get("extra") or {}).items() if v not in (None, {}, [])}
    if extra:
        metadata["extra"] = extra
    return scrub_value({"messages": _messages(record), "metadata": metadata, "spans": spans})


def sample_groups(records: list[dict], limit: int, seed: str) -> list[dict]:
    """At most `limit` of `records`, in their order; a random sample seeded by `seed` when there are more."""
    if len(records) <= limit:
        return list(records)
    keep = sorted(random.Random(seed).sample(range(len(records)), limit))
    return [records[i] for i in keep]


def with_trackio_tags(tags, url: str | None):
    """The model card's tags plus `trackio` and `trackio:<url>` (what TRL and transformers add for a Space)."""
    if url is None:
        return tags
    tags = [tags] if isinstance(tags, str) else list(tags or [])
    tags = [t for t in tags if not (isinstance(t, str) and t.startswith("trackio:"))]
    return [*tags, *(t for t in ("trackio", f"trackio:{url}") if t not in tags)]


def add_trackio_badge(card: str, url: str | None) -> str:
    """TRL's "Visualize in Trackio" badge under "Training procedure", unless the card already has one."""
    if url is None or "Visualize in Trackio" in card or "## Training procedure\n" not in card:
        return card
    return card.replace("## Training procedure\n", "## Training procedure\n\n" + BADGE.format(url=url) + "\n", 1)


def link_model_card(readme_path, url: str | None) -> None:
    """[`add_trackio_badge`] on the card file at `readme_path` (nothing without a Space or a card)."""
    path = Path(readme_path)
    if url is not None and path.exists():
        card = path.read_text(encoding="utf-8")
        path.write_text(add_trackio_badge(card, url), encoding="utf-8")


class TrackioEvidence(TrainerCallback):
    """Sends each logged step's evidence as trackio traces and the health alarms as alerts (module docstring).

    Args:
        max_groups: traces per logged step and mode (`rlce_trackio_groups`); 0: none.
        monitor: the trainer's `HealthMonitor` (its `alarms`, `stopped_by`), or None.
        seed: seeds the sample of groups (with the step).
    """

    def __init__(self, max_groups: int = 8, monitor=None, seed: int = 0):
        import trackio  # only a run that reports to trackio gets here; transformers needs it as well

        self._trackio = trackio
        self.max_groups, self.monitor, self.seed = max_groups, monitor, seed
        self.pending: dict[str, list[dict]] = {}
        self.alerted = 0
        #: The URL of the run's Space (None: a local project), read while the run is open, for the model card.
        self.space_url: str | None = None
        self.traces_sent = 0
        #: TRL's completions-table buffers (`GRPOTrainer._logs`), scrubbed before TRL logs them (`attach_trackio`).
        self.completions: dict | None = None

    def add(self, records: list[dict]) -> None:
        """An `EvidenceRecorder` listener: keep the group records of the latest step until it is logged (those of
        earlier, unlogged steps are dropped, so memory stays one step's records whatever `logging_steps`)."""
        if self.max_groups <= 0:
            return
        for record in records:
            if record.get("type") is None and record.get("mode") in TRACE_KEYS:
                kept = self.pending.setdefault(record["mode"], [])
                if kept and kept[-1].get("step") != record.get("step"):
                    kept.clear()
                kept.append(record)

    def _run(self):
        return self._trackio.context_vars.current_run.get()

    def _remember_space(self) -> None:
        if self.space_url is None and self._run() is not None:
            from trl.trainer.utils import get_trackio_space_url

            self.space_url = get_trackio_space_url()

    def on_train_begin(self, args, state, control, **kwargs):
        self._remember_space()

    def on_log(self, args, state, control, logs=None, **kwargs):
        run = self._run()
        if not state.is_world_process_zero or run is None:
            self.pending.clear()
            return
        self._remember_space()
        self._scrub_completions()
        pending, self.pending = self.pending, {}
        # transformers' TrackioCallback logged this step's metrics just before (callbacks run in order): the traces
        # go to the same trackio step, so the step filter of the Traces page matches the plots' x axis.
        last = getattr(run, "_next_step", None)
        step = last - 1 if isinstance(last, int) and last > 0 else None
        for mode, records in pending.items():
            chosen = sample_groups(records, self.max_groups, f"{self.seed}:{mode}:{records[0].get('step')}")
            traces = []
            for record in chosen:
                try:  # as TRL's own trace logging: a malformed record never breaks training (trackio's `log` too)
                    traces.append(self._trackio.Trace(**evidence_trace(record)))
                except Exception as error:  # noqa: BLE001
                    logger.warning("trackio: group %s was not sent (%s: %s).", scrub(str(record.get("id"))),
                                   type(error).__name__, scrub(str(error)))
            if traces:
                run.log({TRACE_KEYS[mode]: traces}, step=step)
                self.traces_sent += len(traces)

    def _scrub_completions(self) -> None:
        """TRL logs its completions table to trackio right after this callback's `on_log`, from `_logs`: its
        prompts, completions and extra columns go through the scrubber first (the parquet files and the printed
        sample then carry the same scrubbed text)."""
        logs = self.completions
        if not logs:
            return
        columns = [(logs, key) for key in ("prompt", "completion") if key in logs]
        columns += [(logs["extra"], key) for key in list(logs.get("extra") or {})]
        for owner, key in columns:
            column = owner[key]
            if isinstance(column, deque):
                owner[key] = deque(scrub_value(list(column)), maxlen=column.maxlen)
            elif isinstance(column, list):
                owner[key] = scrub_value(column)

    def on_step_end(self, args, state, control, **kwargs):  # after the monitor's, which raises the step's alarms
        alarms = list(getattr(self.monitor, "alarms", None) or [])
        new, self.alerted = alarms[self.alerted:], len(alarms)
        run = self._run()
        if not new or run is None or not state.is_world_process_zero:
            return
        stopped = getattr(self.monitor, "stopped_by", None)
        for alarm in new:
            level = self._trackio.AlertLevel.ERROR if alarm is stopped else self._trackio.AlertLevel.WARN
            text = alarm.message + (" -- the run stops here (health_stop)." if alarm is stopped else "")
            run.alert(title=scrub(f"training health: {alarm.rule.replace('_', ' ')}"), text=scrub(text), level=level)


def attach_trackio(trainer) -> TrackioEvidence | None:
    """With `report_to` naming trackio: a [`TrackioEvidence`] fed by the trainer's evidence recorder and added to its
    callbacks; else None (nothing changes)."""
    args = trainer.args
    if "trackio" not in args.report_to:  # a list once TrainingArguments has read it
        return None
    tracker = TrackioEvidence(args.rlce_trackio_groups, getattr(trainer, "health", None), args.seed)
    trainer.evidence.listeners.append(tracker.add)
    tracker.completions = getattr(trainer, "_logs", None)
    trainer.add_callback(tracker)
    return tracker
