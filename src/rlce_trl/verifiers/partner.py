"""A frozen *partner* model beside the verifier (spec §0.2): the co-evolution phases score a trained role against a
frozen opponent (RLAC's critic, VisPlay's reasoner, Video-Zero's solver).

Its settings are the `partner_*` fields of [`RLCEGRPOConfig`]. [`server_partner`] (`partner_mode="server"`) is a
client of the partner's OpenAI-compatible server through the one server verifier (its deadlines, retries and health
check); `partner_mode="transformers"` is loaded once in this process by [`VerifierFactory`]. The partner reaches a
scorer as the keyword `partner=` of its constructor (`rlce_trl.methods.build_scorer`); a scorer built with
`partner=None` uses its verifier as the partner (the single-model variant).
"""

from __future__ import annotations

from .base import Verifier, VerifierUnavailableError


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
