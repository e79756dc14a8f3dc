"""A frozen *partner* model beside the verifier (spec §0.2): the co-evolution phases score a trained role against a
frozen opponent (RLAC's critic, VisPlay's reasoner, Video-Zero's solver).

- [`PartnerArguments`]: the config keys (a dataclass mixin of [`RLCEGRPOConfig`], torch-free).
- [`server_partner`]: `partner_mode="server"`: a client of the partner's OpenAI-compatible server, through the one
  server verifier (its deadlines, retries and health check). A server that is down fails at once, naming the URL and
  the fix.

`partner_mode="transformers"` is loaded once in this process by [`~rlce_trl.verifiers.factory.VerifierFactory`].
The partner reaches a scorer as the keyword `partner=` of its constructor (`rlce_trl.methods.build_scorer`); a scorer
built with `partner=None` uses its verifier as the partner (the single-model variant).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Verifier, VerifierUnavailableError

PARTNER_MODES = ("transformers", "server")


@dataclass
class PartnerArguments:
    r"""
    > Parameters that control the frozen partner model (co-evolution phases)

    Parameters:
        partner_model_name_or_path (`str`, *optional*):
            The frozen partner (e.g. the critic checkpoint a generator phase plays against). `None` with
            `partner_mode="transformers"`: no partner; scorers that take one use the verifier.
        partner_mode (`str`, *optional*, defaults to `"transformers"`):
            `"transformers"`: loaded once in this process. `"server"`: an OpenAI-compatible server at
            `partner_server_base_url` (e.g. `vllm serve <partner checkpoint>`), with the `verifier_*` client settings
            (timeouts, overall deadline, retries).
        partner_server_base_url (`str`, *optional*):
            Base URL of the partner server; required with `partner_mode="server"`.
    """

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

    def partner_problems(self) -> list[str]:
        """Invalid partner settings, each with its fix (collected by `RLCEGRPOConfig.__post_init__`)."""
        problems = []
        if self.partner_mode not in PARTNER_MODES:
            problems.append(f"partner_mode={self.partner_mode!r}: use one of {', '.join(PARTNER_MODES)}.")
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
        return problems


def server_partner(args) -> Verifier:
    """The partner's server client (`partner_mode="server"`), with the verifier's client settings. Fails fast with
    one line naming the URL and the fix when the server does not answer."""
    from ..credentials import clean_urls
    from .from_config import client_settings
    from .server import ServerVerifier

    try:
        return ServerVerifier(args.partner_server_base_url, model=None, **client_settings(args))
    except VerifierUnavailableError as error:
        raise VerifierUnavailableError(
            f"The partner server at {clean_urls(args.partner_server_base_url)} does not answer ({error}): start it "
            "(e.g. `vllm serve <partner checkpoint>`) and check partner_server_base_url, or use "
            "partner_mode='transformers'."
        ) from None
