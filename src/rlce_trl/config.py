"""RLCEGRPOConfig: GRPOConfig plus the verifier, reward, health, video and partner settings (every field of the
package's training config; the rules of the video settings are in `config_video.py`)."""

from __future__ import annotations

import importlib.util
import json
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trl import GRPOConfig

from .checkpointing_compat import (
    HAS_ACTIVATION_CHECKPOINTING,
    mirror_activation_checkpointing,
    translate_activation_checkpointing,
)
from .config_video import frame_kwargs, video_problems
from .credentials import scrub, scrub_value
from .data.hba import FRAME_FPS, FRAME_SIZE, MAX_FRAMES, MIN_FRAMES
from .data.media import VIDEO_INPUTS
from .errors import run_setting_problems
from .evidence.state import MODES as RLCE_MODES
from .evidence.validation import REDACTION_MODES
from .health import threshold_problems
from .health.signal import default_signal_patience

if TYPE_CHECKING:  # the registry and the evidence pipeline are imported when used, never with the config
    from .evidence.pipeline import EvidenceSettings

VERIFIER_MODES = ("transformers", "server", "colocate")
PARTNER_MODES = ("transformers", "server")
#: The prefixes of the settings the reward object [`~rlce_trl.RLCEReward`] reads.
REWARD_PREFIXES = ("rlce_", "verifier_")
#: Count settings by their lowest valid value.
_AT_LEAST = {
    1: ("verifier_max_concurrency", "verifier_tensor_parallel_size", "verifier_batch_size",
        "rlce_construction_max_tokens", "rlce_validation_max_tokens", "rlce_equivalence_max_tokens",
        "health_warmup_steps", "health_window"),
    0: ("verifier_max_retries", "verifier_max_consecutive_failures", "verifier_max_outage"),
}


def json_problems(settings, name: str, example: str = "") -> list[str]:
    """Read the dict setting `name` of `settings` from JSON when it came as text (the command line); the problem if
    it is not valid JSON (naming `example`, an object, when given)."""
    text = getattr(settings, name)
    if isinstance(text, str):
        try:
            setattr(settings, name, json.loads(text) if text.strip() else None)
        except json.JSONDecodeError as error:
            like = f" like '{example}'" if example else ""
            return [f"{name} is not valid JSON ({error}): pass an object{like}."]
    return []


@dataclass
class RLCEGRPOConfig(GRPOConfig):
    r"""
    Configuration class for [`RLCEGRPOTrainer`].

    Everything of [`~trl.GRPOConfig`] applies unchanged; this class only adds the frozen verifier (`verifier_*`), the
    group reward (`reward_method`, the comparative-evidence reward `rlce_*`), the training-health monitor
    (`health_*`), the video rows (`video_*`: how clips enter the policy, frame sampling) and the frozen partner model
    of the co-evolution phases (`partner_*`). Defaults are the paper's settings (appendix C) for PrefEval and IntentQA;
    the recipes under `configs/` set the per-task values (e.g. 3 tests per direction for MOSEI, 6 for UR-FUNNY).

    Using [`~transformers.HfArgumentParser`] (TRL's `TrlParser`) this class becomes command-line arguments, and a
    recipe's keys are these names.

    Parameters:
        > Parameters that control the verifier

        verifier_mode (`str`, *optional*, defaults to `"transformers"`):
            Backend of the frozen verifier (mirrors TRL's `vllm_mode`). `"transformers"`: an in-process copy of the
            initial model (reusing the trainer's reference model or the PEFT base model when that is safe).
            `"server"`: OpenAI-compatible server(s) at `verifier_server_base_url` (e.g. `vllm serve <initial
            checkpoint>`). `"colocate"`: a vLLM server process that the trainer starts on each training GPU.
        verifier_model_name_or_path (`str`, *optional*):
            Model that serves as frozen verifier. Defaults to the initial checkpoint of the policy.
        verifier_batch_size (`int`, *optional*, defaults to `16`):
            Prompts per forward batch of the transformers backend.
        verifier_server_base_url (`str`, *optional*):
            Base URL of the verifier server, or several, comma-separated (requests are spread across them).
            Required with `verifier_mode="server"`.
        verifier_server_model (`str`, *optional*):
            Served model name; by default the first one the server lists at `/v1/models`.
        verifier_max_concurrency (`int`, *optional*, defaults to `64`):
            Requests in flight at once per process (server and colocate modes).
        verifier_timeout (`float`, *optional*, defaults to `300.0`):
            Seconds one request may take before it is retried.
        verifier_request_deadline (`float`, *optional*, defaults to `900.0`):
            Overall deadline of one verifier request, seconds: every attempt, backoff and the whole reply included
            (a server that trickles bytes cannot hold a step longer than this).
        verifier_max_reply_bytes (`int`, *optional*, defaults to `16000000`):
            Largest verifier reply accepted, bytes; a larger one fails that request.
        verifier_max_retries (`int`, *optional*, defaults to `3`):
            Retries of a request after a connection error, a timeout or a 5xx reply, with exponential backoff.
        verifier_max_consecutive_failures (`int`, *optional*, defaults to `5`):
            Verifier calls in a row with no successful reply before the run stops with an error; the groups of a
            failed call get no verification reward meanwhile. `0` never stops.
        verifier_max_outage (`float`, *optional*, defaults to `300`):
            Seconds a verifier outage must also have lasted (since the first of those failed calls) before the run
            stops: a server restarted within it costs unscored groups, not the run. `0`: the count alone decides.
        verifier_gpu_memory_utilization (`float`, *optional*, defaults to `0.2`):
            Share of each GPU's memory for the co-located verifier server (colocate mode).
        verifier_tensor_parallel_size (`int`, *optional*, defaults to `1`):
            Tensor-parallel size of the co-located verifier server.
        verifier_max_model_length (`int`, *optional*):
            Context length of the co-located verifier server. By default the longest request it can receive: the
            prompt (`max_prompt_length`, else `vllm_max_model_length - max_completion_length`), the group's answers,
            template and reply (`rlce_trl.verifiers.sizing`); the model's own when neither length is known.
        verifier_startup_timeout (`float`, *optional*, defaults to `900.0`):
            Seconds the co-located verifier server may take to answer `/health` at start-up (and after a restart).
        verifier_enable_sleep_mode (`bool`, *optional*, defaults to `False`):
            Put the co-located verifier to sleep between reward computations, freeing its GPU memory for training.
        verifier_vllm_python (`str`, *optional*):
            Python interpreter with vLLM for the co-located server; `$RLCE_VLLM_PYTHON` or this one by default.
        verifier_vllm_args (`str`, *optional*, defaults to `""`):
            Extra command-line arguments of the co-located vLLM server (e.g. `"--enforce-eager"`).

        > Parameters that control the reward

        reward_method (`str`, *optional*, defaults to `"rlce"`):
            The group reward: `"rlce"`, or a label-free baseline run on the same verifier for comparison: `"usc"`,
            `"policy_judge"`, `"ttrl"`, `"rar"`, `"rler"` (see `rlce_trl.methods`), or your own scorer as
            `"package.module:Class"` (built as `Class(verifier, settings, **reward_method_kwargs)`; the config
            checks its form only, a path that does not import fails when the trainer is built). The aliases
            `"rlce_static"` / `"rlce_pointwise"` are turned into `reward_method="rlce"` and that `rlce_mode`.
        reward_method_kwargs (`dict`, *optional*):
            Keyword arguments of the scorer (e.g. `{"max_active": 3}` for `rler`, `{"tie": "none"}` for `ttrl`); a
            JSON object on the command line.
        rlce_mode (`str`, *optional*, defaults to `"evolving"`):
            The one knob of the RLCE ablations. `"evolving"`: tests regenerated every step for the current answers
            (RLCE). `"static"`: tests fixed per prompt: built once per ordered pair of answer classes, then reused
            with their verdicts; on free text a new answer is matched to the prompt's earlier answer classes in the
            equivalence call, so a paraphrase reuses its class's tests (saved with checkpoints). `"pointwise"`:
            tests built per answer alone, reward when a majority is satisfied.
        rlce_tests_per_direction (`int`, *optional*, defaults to `1`):
            Evidence tests sampled per direction of each answer pair (pointwise: per answer).
        rlce_tie_break_tests_per_direction (`int`, *optional*, defaults to `1`):
            Extra tests per direction for each comparison left unresolved by a tie (one extra round); `0` disables
            tie-breaking.
        rlce_verified_weight (`float`, *optional*, defaults to `0.8`):
            Weight of the verification reward.
        rlce_format_weight (`float`, *optional*, defaults to `0.2`):
            Weight of the `\boxed{}` format reward.
        rlce_labels_column (`str`, *optional*, defaults to `"answer_options"`):
            Dataset column holding the closed label set of a row; a missing column or an empty list means free text.
        rlce_construction_temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of test construction.
        rlce_construction_top_p (`float`, *optional*, defaults to `0.95`):
            Top-p of test construction.
        rlce_construction_top_k (`int`, *optional*, defaults to `20`):
            Top-k of test construction (`0` disables it).
        rlce_construction_max_tokens (`int`, *optional*, defaults to `128`):
            Token limit of one constructed test.
        rlce_validation_max_tokens (`int`, *optional*, defaults to `16`):
            Token limit of one verdict.
        rlce_equivalence_max_tokens (`int`, *optional*, defaults to `256`):
            Token limit of one group's equivalence judgement (free text).
        rlce_redact_answers (`bool`, *optional*, defaults to `True`):
            Redact mentions of candidate answers from tests before validation (any case, at word boundaries; for
            closed labels every label). The options line is removed from the validator's context either way.
        rlce_redaction (`str`, *optional*, defaults to `"answers"`):
            What redaction removes: `"answers"` (appendix C.1, "candidate answers are removed from the validator
            input"): the candidate answers as written and, for closed labels, every label string ("positive", "not
            humour"), keeping descriptive words ("positively upbeat", "humorous"); `"inflections"`: every label with
            all its inflections as well ("positively", "negativity", "humorous").
        rlce_answer_fallback (`bool`, *optional*, defaults to `True`):
            Read answers as evaluation does (appendix A): a response without `\boxed{}` still answers with the one
            label it names (closed labels) or with its whole text (free text). `False`: only boxed answers count.
        rlce_evidence (`bool`, *optional*, defaults to `True`):
            Write the evidence audit trail `<output_dir>/rlce_evidence.jsonl` (main process, once per step): per
            group the distinct answers, every test with its direction and verdict, scores, winner and status (see
            `rlce_trl.audit`); `rlce-trl report` shows it. Baselines record what they have (judgments, rubrics).
        rlce_evidence_max_mb (`float`, *optional*, defaults to `1024`):
            Size limit of the trail in MB; past it no more groups are recorded (or the trail rotates, see
            `rlce_evidence_rotate`). `0`: no limit.
        rlce_evidence_rotate (`int`, *optional*, defaults to `0`):
            For long runs: at `rlce_evidence_max_mb` the trail becomes `rlce_evidence.1.jsonl` (older parts shift up
            to `rlce_evidence.<N>.jsonl`, the oldest is removed) and a fresh file begins, so the newest steps are
            kept and the trail never takes more than `(N + 1) * rlce_evidence_max_mb` MB. `0`: the trail stops at
            the limit (the start of the run is kept).
        rlce_completions_keep (`int`, *optional*, defaults to `0`):
            With `log_completions=True`: keep only the newest N completions tables (`completions/*.parquet`, one per
            logged step) and remove older ones after each step. `0`: keep all.
        rlce_trackio_groups (`int`, *optional*, defaults to `8`):
            With `report_to="trackio"`: rollout groups sent to trackio per logged step, each as a `trackio.Trace`
            (prompt, distinct answers, one span per verifier call with its tests and verdicts, rewards as metadata;
            `rlce_trl.tracking`). A step with more groups sends this many, sampled at random (seeded by the step).
            `0`: no traces (metrics and alerts are still sent).
        rlce_prompts_file (`str`, *optional*):
            Verifier prompts as data (`evidence/prompt_set.py`): construction / validation text and few-shot examples.
            Label-light (VeriFine-style calibration); the paper-reproduction recipes never set it.
        rlce_verdict_calibration_file (`str`, *optional*):
            Calibrated verdicts (`rlce-trl calibrate fit`): contextual calibration and an "unknown" band applied to the
            verifier's per-choice probabilities. Label-light and opt-in.

        > Parameters that control the training-health monitor (`rlce_trl.health`)

        health_monitor (`bool`, *optional*, defaults to `True`):
            Watch the run for collapse and entrenchment: log `health/*` metrics per step and raise an alarm (a warning
            in the log, a line in the evidence trail and in `<output_dir>/rlce_health.jsonl`, the report and the
            model card) when a rule fires. See `docs/health.md`.
        health_stop (`bool`, *optional*, defaults to `False`):
            End the run cleanly at the first alarm: a checkpoint is saved and the model card says why.
        health_warmup_steps (`int`, *optional*, defaults to `3`):
            First steps whose metrics are the reference (the base model's behaviour).
        health_window (`int`, *optional*, defaults to `3`):
            Steps pooled for each check (the entrenchment check reads every step since the reference).
        health_thresholds (`dict`, *optional*):
            Thresholds of the alarm rules to override, by name (`rlce_trl.health.HealthThresholds`, e.g.
            `{"collapse_share": 0.9}`); a JSON object on the command line.
        health_signal_patience (`int`, *optional*, defaults to `2`):
            Stop the run when none of its first this-many steps had a learning signal (no group whose rewards
            differ): the checkpoint is saved, the report and the model card say "no learning signal", and `train()`
            raises `NoLearningSignalError` with the cause and the fix (non-zero exit). `0` turns the stop off (every
            step without signal is still logged). The default can be changed with `$RLCE_HEALTH_SIGNAL_PATIENCE`.
            Needs `health_monitor`.

        > Parameters that control video rows (Human Behavior Atlas tasks)

        video_input (`str`, *optional*, defaults to `"video"`):
            How a row's clip enters the policy. `"video"`: a video input of the processor, in generation and in every
            log-probability forward (old, reference, current), rendered exactly as `rlce-trl evaluate` renders it.
            `"images"`: the frames as a list of images (TRL's own multi-image path, which vLLM generation also
            takes; no timestamps, about twice the visual tokens, evaluation still uses video blocks, and the verifier
            does not see the frames).
            `"text"`: the frames are dropped (text-only policy, frame-stripped control).
        video_fps (`float`, *optional*, defaults to `1.0`):
            Frames sampled per second of clip (paper, appendix A).
        video_min_frames (`int`, *optional*, defaults to `2`):
            Fewest frames per clip.
        video_max_frames (`int`, *optional*, defaults to `8`):
            Most frames per clip.
        video_frame_height (`int`, *optional*, defaults to `176`):
            Frame height after resizing (the processor rounds it up to its patch grid).
        video_frame_width (`int`, *optional*, defaults to `320`):
            Frame width after resizing.

        > Parameters that control the frozen partner model (co-evolution phases)

        partner_model_name_or_path (`str`, *optional*):
            The frozen partner (e.g. the critic checkpoint a generator phase plays against). `None` with
            `partner_mode="transformers"`: no partner; scorers that take one use the verifier.
        partner_mode (`str`, *optional*, defaults to `"transformers"`):
            `"transformers"`: loaded once in this process. `"server"`: an OpenAI-compatible server at
            `partner_server_base_url` (e.g. `vllm serve <partner checkpoint>`), with the `verifier_*` client settings
            (timeouts, overall deadline, retries).
        partner_server_base_url (`str`, *optional*):
            Base URL of the partner server; required with `partner_mode="server"`.

        > Parameters that control activation checkpointing on transformers < 5.25 (the vLLM environment's)

        activation_checkpointing (`bool`, *optional*):
            The recipes' name of `gradient_checkpointing`, handed to it (`rlce_trl.checkpointing_compat`). A field
            here only where `TrainingArguments` lacks it; `None`: `gradient_checkpointing` decides.
        activation_checkpointing_kwargs (`dict`, *optional*):
            The recipes' name of `gradient_checkpointing_kwargs`, handed to it likewise.
    """

    # Parameters that control the verifier
    verifier_mode: str = field(
        default="transformers",
        metadata={"help": "Backend of the frozen verifier.", "choices": list(VERIFIER_MODES)},
    )
    verifier_model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Model that serves as frozen verifier. Defaults to the initial checkpoint of the policy."},
    )
    verifier_batch_size: int = field(
        default=16, metadata={"help": "Prompts per forward batch of the transformers verifier backend."}
    )
    verifier_server_base_url: str | None = field(
        default=None,
        metadata={"help": "Verifier server base URL(s), comma-separated; required with verifier_mode='server'."},
    )
    verifier_server_model: str | None = field(
        default=None, metadata={"help": "Served model name; the first one listed at /v1/models by default."}
    )
    verifier_max_concurrency: int = field(default=64, metadata={"help": "Verifier requests in flight per process."})
    verifier_timeout: float = field(default=300.0, metadata={"help": "Seconds one verifier request may take."})
    verifier_request_deadline: float = field(
        default=900.0, metadata={"help": "Overall deadline of one verifier request (all attempts, whole reply), s."}
    )
    verifier_max_reply_bytes: int = field(
        default=16_000_000, metadata={"help": "Largest verifier reply accepted, bytes."}
    )
    verifier_max_retries: int = field(default=3, metadata={"help": "Retries of a failed verifier request."})
    verifier_max_consecutive_failures: int = field(
        default=5,
        metadata={"help": "Failed verifier calls in a row before the run stops with an error (0: never)."},
    )
    verifier_max_outage: float = field(
        default=300.0,
        metadata={"help": "Seconds a verifier outage must also last before the run stops (0: the count alone)."},
    )
    verifier_gpu_memory_utilization: float = field(
        default=0.2, metadata={"help": "Share of each GPU's memory for the co-located verifier server."}
    )
    verifier_tensor_parallel_size: int = field(
        default=1, metadata={"help": "Tensor-parallel size of the co-located verifier server."}
    )
    verifier_max_model_length: int | None = field(
        default=None, metadata={"help": "Context length of the co-located verifier server."}
    )
    verifier_startup_timeout: float = field(
        default=900.0, metadata={"help": "Seconds the co-located verifier server may take to start."}
    )
    verifier_enable_sleep_mode: bool = field(
        default=False, metadata={"help": "Let the co-located verifier sleep between reward computations."}
    )
    verifier_vllm_python: str | None = field(
        default=None, metadata={"help": "Python with vLLM for the co-located server ($RLCE_VLLM_PYTHON by default)."}
    )
    verifier_vllm_args: str = field(
        default="", metadata={"help": "Extra command-line arguments of the co-located vLLM server."}
    )

    # Parameters that control the reward
    reward_method: str = field(
        default="rlce",
        metadata={
            "help": "Group reward: 'rlce', a baseline on the same verifier (usc, policy_judge, ttrl, rar, rler), or "
            "your own scorer as 'package.module:Class'.",
        },
    )
    reward_method_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Keyword arguments of the scorer, as a JSON object (e.g. '{\"max_active\": 3}')."},
    )
    rlce_mode: str = field(
        default="evolving",
        metadata={
            "help": "'evolving' (tests regenerated every step), 'static' (built once per prompt and pair of answer "
            "classes, reused) or 'pointwise' (tests per answer alone, majority rule).",
            "choices": list(RLCE_MODES),
        },
    )
    rlce_tests_per_direction: int = field(
        default=1, metadata={"help": "Evidence tests per direction of each answer pair (pointwise: per answer)."}
    )
    rlce_tie_break_tests_per_direction: int = field(
        default=1,
        metadata={"help": "Extra tests per direction for each comparison left tied (one round); 0 disables."},
    )
    rlce_verified_weight: float = field(default=0.8, metadata={"help": "Weight of the verification reward."})
    rlce_format_weight: float = field(default=0.2, metadata={"help": "Weight of the \\boxed{} format reward."})
    rlce_labels_column: str = field(
        default="answer_options",
        metadata={"help": "Column with a row's closed label set; missing or empty means free text."},
    )
    rlce_construction_temperature: float = field(default=1.0, metadata={"help": "Temperature of test construction."})
    rlce_construction_top_p: float = field(default=0.95, metadata={"help": "Top-p of test construction."})
    rlce_construction_top_k: int = field(default=20, metadata={"help": "Top-k of test construction (0: off)."})
    rlce_construction_max_tokens: int = field(default=128, metadata={"help": "Token limit of one constructed test."})
    rlce_validation_max_tokens: int = field(default=16, metadata={"help": "Token limit of one verdict."})
    rlce_equivalence_max_tokens: int = field(
        default=256, metadata={"help": "Token limit of one group's equivalence judgement (free text)."}
    )
    rlce_redact_answers: bool = field(
        default=True, metadata={"help": "Redact mentions of candidate answers from tests before validation."}
    )
    rlce_redaction: str = field(
        default="answers",
        metadata={
            "help": "What redaction removes: the candidate answers / label strings as written (answers, the paper's "
            "reading) or every label inflection too (inflections).",
            "choices": list(REDACTION_MODES),
        },
    )
    rlce_answer_fallback: bool = field(
        default=True,
        metadata={"help": "Read a response without \\boxed{} as evaluation does (its one label, or its whole text)."},
    )
    rlce_evidence: bool = field(
        default=True,
        metadata={"help": "Keep the evidence audit trail <output_dir>/rlce_evidence.jsonl (tests, verdicts, winner)."},
    )
    rlce_evidence_max_mb: float = field(
        default=1024.0, metadata={"help": "Size limit of the evidence audit trail in MB (0: no limit)."}
    )
    rlce_evidence_rotate: int = field(
        default=0,
        metadata={"help": "At rlce_evidence_max_mb rotate the trail, keeping this many older parts "
                  "(rlce_evidence.1.jsonl, ...); 0: the trail stops at the limit."},
    )
    rlce_completions_keep: int = field(
        default=0,
        metadata={"help": "With log_completions: keep only the newest N completions tables (one parquet per logged "
                  "step); 0: keep all."},
    )
    rlce_trackio_groups: int = field(
        default=8,
        metadata={"help": "With report_to trackio: rollout groups per logged step sent to trackio as traces (tests, "
                  "verdicts, rewards), sampled when a step has more; 0: none."},
    )
    rlce_prompts_file: str | None = field(
        default=None,
        metadata={"help": "Verifier prompts file (JSON/YAML: construction / validation text, few-shot examples), e.g. "
                  "from `rlce-trl calibrate run`. Label-light: never in the paper recipes. None: built-in prompts."},
    )
    rlce_verdict_calibration_file: str | None = field(
        default=None,
        metadata={"help": "Calibrated verdicts (from `rlce-trl calibrate fit`): validation verdicts are read from the "
                  "verifier's choice probabilities through it. Label-light, opt-in; None reads the argmax verdict."},
    )

    # Parameters that control the training-health monitor (`rlce_trl.health`)
    health_monitor: bool = field(
        default=True,
        metadata={"help": "Watch for collapse and entrenchment: health/* metrics, alarms (docs/health.md)."},
    )
    health_stop: bool = field(
        default=False, metadata={"help": "End the run cleanly at the first health alarm (checkpoint saved)."}
    )
    health_warmup_steps: int = field(
        default=3, metadata={"help": "First steps whose health metrics are the reference (the base model's)."}
    )
    health_window: int = field(default=3, metadata={"help": "Steps pooled for each health check."})
    health_thresholds: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Health alarm thresholds to override, as a JSON object (e.g. '{\"collapse_share\": 0.9}'); "
                  "names in rlce_trl.health.HealthThresholds."},
    )
    health_signal_patience: int = field(
        default_factory=default_signal_patience,
        metadata={"help": "Stop the run (non-zero exit) when none of its first N steps had a learning signal; 0: "
                  "never (steps without signal are still logged). Default 2, or $RLCE_HEALTH_SIGNAL_PATIENCE."},
    )

    # Parameters that control video rows (Human Behavior Atlas tasks)
    video_input: str = field(
        default="video",
        metadata={"help": "How clips enter the policy: video, images or text.", "choices": list(VIDEO_INPUTS)},
    )
    video_fps: float = field(default=FRAME_FPS, metadata={"help": "Frames sampled per second of clip."})
    video_min_frames: int = field(default=MIN_FRAMES, metadata={"help": "Fewest frames per clip."})
    video_max_frames: int = field(default=MAX_FRAMES, metadata={"help": "Most frames per clip."})
    video_frame_height: int = field(default=FRAME_SIZE[0], metadata={"help": "Frame height after resizing."})
    video_frame_width: int = field(default=FRAME_SIZE[1], metadata={"help": "Frame width after resizing."})

    # Parameters that control the frozen partner model (co-evolution phases)
    partner_model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Frozen partner model (co-evolution: the opponent of the trained role); None: none."},
    )
    partner_mode: str = field(
        default="transformers",
        metadata={"help": "Backend of the partner: transformers or server.", "choices": list(PARTNER_MODES)},
    )
    partner_server_base_url: str | None = field(
        default=None, metadata={"help": "Partner server base URL; required with partner_mode='server'."}
    )

    # Parameters that control activation checkpointing on transformers < 5.25 (the vLLM environment's)
    if not HAS_ACTIVATION_CHECKPOINTING:  # TrainingArguments' own fields on transformers >= 5.25
        activation_checkpointing: bool | None = field(
            default=None,
            metadata={"help": "Recompute activations in the backward pass to save memory (gradient_checkpointing on "
                      "this transformers). None: gradient_checkpointing decides."},
        )
        activation_checkpointing_kwargs: dict[str, Any] | str | None = field(
            default=None,
            metadata={"help": "Keyword arguments of activation checkpointing (gradient_checkpointing_kwargs on this "
                      "transformers)."},
        )

    def __post_init__(self):
        problems = []
        if self.num_generations is not None and self.num_generations < 2:
            problems.append(
                f"num_generations={self.num_generations}: RLCE compares the distinct answers of a rollout group, so "
                "set num_generations to 2 or more (the paper uses 4)."
            )
        problems += self._reward_method_problems()
        for name, choices in (("verifier_mode", VERIFIER_MODES), ("rlce_mode", RLCE_MODES),
                              ("rlce_redaction", REDACTION_MODES), ("partner_mode", PARTNER_MODES)):
            if getattr(self, name) not in choices:
                problems.append(f"{name}={getattr(self, name)!r}: use one of {', '.join(choices)}.")
        problems += [f"{key} {problem}" for key, problem in run_setting_problems(self)]
        if self.verifier_mode == "server" and not self.verifier_server_base_url:
            problems.append(
                "verifier_mode='server' needs verifier_server_base_url: start a server with `vllm serve <initial "
                "checkpoint>` and pass its URL, or use verifier_mode='colocate' to let the trainer start it."
            )
        if not 0 < self.verifier_gpu_memory_utilization <= 1:
            problems.append("verifier_gpu_memory_utilization must be in (0, 1].")
        if (
            self.verifier_mode == "colocate"
            and self.use_vllm
            and self.vllm_mode == "colocate"
            and self.verifier_gpu_memory_utilization + self.vllm_gpu_memory_utilization >= 0.95
        ):
            problems.append(
                f"verifier_gpu_memory_utilization ({self.verifier_gpu_memory_utilization}) + "
                "vllm_gpu_memory_utilization "
                f"({self.vllm_gpu_memory_utilization}) leave no GPU memory for training: keep their sum below 0.95."
            )
        for low, names in _AT_LEAST.items():
            problems += [f"{name} must be >= {low}." for name in names if getattr(self, name) < low]
        for name in ("verifier_timeout", "verifier_startup_timeout", "verifier_request_deadline"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0 seconds.")
        if self.verifier_max_reply_bytes < 1024:
            problems.append("verifier_max_reply_bytes must be >= 1024.")
        for name in ("rlce_verified_weight", "rlce_format_weight"):
            if getattr(self, name) < 0:
                problems.append(f"{name}={getattr(self, name)}: reward weights must be >= 0.")
        if self.rlce_verified_weight == 0 and self.rlce_format_weight == 0:
            problems.append("rlce_verified_weight and rlce_format_weight are both 0: set at least one above 0.")
        if self.rlce_tests_per_direction < 1:
            problems.append(f"rlce_tests_per_direction={self.rlce_tests_per_direction}: set it to 1 or more.")
        if self.rlce_tie_break_tests_per_direction < 0:
            problems.append("rlce_tie_break_tests_per_direction must be >= 0 (0 disables tie-breaking).")
        if not 0 < self.rlce_construction_top_p <= 1:
            problems.append("rlce_construction_top_p must be in (0, 1].")
        if self.rlce_construction_temperature <= 0:
            problems.append("rlce_construction_temperature must be > 0: tests are sampled (the paper uses 1.0).")
        if self.rlce_evidence_max_mb < 0:
            problems.append("rlce_evidence_max_mb must be >= 0 (0: no limit; rlce_evidence=False: no trail).")
        if self.rlce_evidence_rotate < 0:
            problems.append(f"rlce_evidence_rotate={self.rlce_evidence_rotate}: use 0 (stop at the size limit) or "
                            "the number of rotated parts to keep.")
        elif self.rlce_evidence_rotate and not self.rlce_evidence_max_mb:
            problems.append(f"rlce_evidence_rotate={self.rlce_evidence_rotate} needs a size to rotate at: set "
                            "rlce_evidence_max_mb above 0.")
        if self.rlce_completions_keep < 0:
            problems.append(f"rlce_completions_keep={self.rlce_completions_keep}: use 0 (keep every completions "
                            "table) or the number of newest tables to keep.")
        if self.rlce_trackio_groups < 0:
            problems.append(f"rlce_trackio_groups={self.rlce_trackio_groups}: use 0 (no traces) or more groups.")
        trackers = [self.report_to] if isinstance(self.report_to, str) else list(self.report_to or [])
        if "trackio" in trackers and importlib.util.find_spec("trackio") is None:  # else a traceback in the trainer
            problems.append("report_to=trackio needs the trackio package: pip install 'rlce-trl[trackio]' (or drop "
                            "trackio from report_to).")
        if self.health_signal_patience < 0:
            problems.append(f"health_signal_patience={self.health_signal_patience}: use 0 (no stop) or more steps.")
        problems += json_problems(self, "health_thresholds", '{"collapse_share": 0.9}') or [
            f"health_thresholds: {p}" for p in threshold_problems(self.health_thresholds)]
        problems += video_problems(self)
        if self.partner_mode == "server" and not self.partner_server_base_url:
            problems.append(
                "partner_mode='server' needs partner_server_base_url: start a server with `vllm serve <partner "
                "checkpoint>` and pass its URL, or use partner_mode='transformers'."
            )
        if self.partner_mode == "transformers" and self.partner_server_base_url:
            problems.append(
                "partner_server_base_url is set but partner_mode='transformers': set partner_mode='server' to use "
                "the server, or drop the URL."
            )
        if self.rlce_prompts_file is not None:
            from .evidence.prompt_set import load_prompts

            try:
                load_prompts(self.rlce_prompts_file)
            except ValueError as error:
                problems.append(f"rlce_prompts_file: {error}")
        if self.rlce_verdict_calibration_file is not None:
            from .verifiers.calibrated import VerdictCalibration

            try:
                VerdictCalibration.load(self.rlce_verdict_calibration_file)
            except ValueError as error:
                problems.append(f"rlce_verdict_calibration_file: {error}")
        if problems:
            raise ValueError("Invalid RLCEGRPOConfig:\n- " + "\n- ".join(problems))
        translate_activation_checkpointing(self)  # the recipes' key on transformers < 5.25 (checkpointing_compat.py)
        super().__post_init__()
        mirror_activation_checkpointing(self)
        self._warn_vllm_only_sampling()
        # the names every tracker (trackio, wandb, ...) shows, sent as they are
        self.run_name, self.project = scrub(self.run_name), scrub(self.project)

    def _warn_vllm_only_sampling(self) -> None:
        """`presence_penalty` / `frequency_penalty` are vLLM sampling parameters: transformers generation (use_vllm
        off, as for video rows) keeps them in its GenerationConfig and ignores them. Say so instead of dropping them
        silently."""
        kwargs = self.generation_kwargs if isinstance(self.generation_kwargs, dict) else {}
        dropped = [k for k in ("presence_penalty", "frequency_penalty") if kwargs.get(k) not in (None, 0, 0.0)]
        if dropped and not self.use_vllm:
            warnings.warn(
                f"generation_kwargs {', '.join(f'{k}={kwargs[k]}' for k in dropped)}: vLLM sampling parameters, "
                "ignored by transformers generation (use_vllm=False, as for video rows): rollouts sample without "
                "them. Use vLLM generation (video_input: images with use_vllm: true) to apply them.",
                UserWarning,
                stacklevel=3,
            )

    def _reward_method_problems(self) -> list[str]:
        """Check `reward_method` (through the registry, imported here, not with the module), turn an ablation alias
        into `rlce_mode`, and read `reward_method_kwargs` from JSON."""
        from .methods import method_name_problem, resolve_alias

        problems = []
        problem = method_name_problem(self.reward_method)
        if problem:
            problems.append(problem)
        method, mode = resolve_alias(self.reward_method)
        if mode is not None:
            if self.rlce_mode not in ("evolving", mode):
                problems.append(
                    f"reward_method={self.reward_method!r} and rlce_mode={self.rlce_mode!r} contradict: the ablation "
                    f"has one knob, rlce_mode; set reward_method='rlce' and rlce_mode={mode!r}."
                )
            else:
                self.reward_method, self.rlce_mode = method, mode
        problems += json_problems(self, "reward_method_kwargs", '{"max_active": 3}')
        if self.reward_method_kwargs is not None and not isinstance(self.reward_method_kwargs, dict):
            problems.append(f"reward_method_kwargs must be a JSON object (a dict), got {self.reward_method_kwargs!r}.")
        return problems

    def __getstate__(self):
        """What pickling keeps (the `training_args.bin` of every checkpoint): no credentials. The Hub token is
        dropped and every string is scrubbed by [`rlce_trl.credentials.scrub`] (verifier URLs lose any user-info and
        query string); a resumed run reads them from the environment or the command line again."""
        state = {**self.__dict__, "hub_token": None}
        return {k: scrub_value(v, by_name=False) if isinstance(v, (str, list, tuple, dict)) else v
                for k, v in state.items()}

    def __str__(self):
        """TrainingArguments' listing of every field (printed by scripts and logs), scrubbed of credentials."""
        return scrub(super().__str__())

    __repr__ = __str__

    def to_dict(self):
        """TrainingArguments' `to_dict` (which `to_json_string`, TensorBoard, W&B and MLflow use), scrubbed of
        credentials like pickling."""
        return scrub_value(super().to_dict(), by_name=False)

    def evidence_settings(self) -> EvidenceSettings:
        """The pipeline settings these fields describe."""
        from .evidence.pipeline import settings_from_fields

        return settings_from_fields(vars(self))

    def reward_options(self) -> dict:
        """The settings the reward object reads ([`REWARD_PREFIXES`]), as a plain, picklable dict."""
        return {k: v for k, v in vars(self).items() if k.startswith(REWARD_PREFIXES)}

    #: `args.frame_kwargs()`: the frame sampling of the `video_*` fields, as `rlce_trl.data.hba.with_frames` takes it.
    frame_kwargs = frame_kwargs
