"""The one credential scrubber: every serialisation, log line, error message and file this package writes goes
through it (the config's `to_dict` / `to_json_string` / pickling, verifier and judge errors and warnings,
`predictions.jsonl`, the model card, the command line's error line).

What it removes:

- the user-info of URLs (`http://user:password@host` -> `http://host`) and, in URLs that carried any, the query string;
- query parameters whose name looks like a credential (`?api_key=...`, `&token=...`, `&sig=...`);
- `Bearer <token>` / `Authorization: <value>`, Hub tokens (`hf_...`) and OpenAI-style keys (`sk-...`);
- the value of any environment variable whose name looks like a credential (`*TOKEN*`, `*KEY*`, `*SECRET*`,
  `*PASSWORD*`, ...), wherever it appears verbatim.

Only the standard library is imported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
#: A setting or environment variable whose name says it holds a secret.
SECRET_NAME = re.compile(r"token|key|secret|passw|header|auth|credential|cookie", re.IGNORECASE)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)\]>'\"`|,]+")
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'\"`]+@")
_SECRET_PARAM = re.compile(
    r"([?&](?:[\w.-]*(?:token|key|secret|signature|sig|password|auth)[\w.-]*)=)[^&\s)\]'\"`|]+", re.IGNORECASE
)
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{10,}\b")
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}\b")
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_AUTH_HEADER = re.compile(
    r"((?:Proxy-)?Authorization['\"]?\s*[:=]\s*['\"]?(?:[A-Za-z]+\s+)?)(?!<redacted>)[^\s'\",}]+", re.IGNORECASE
)
_MIN_ENV_SECRET = 6  # shorter values ("1", "true") would scrub ordinary words


def clean_url(url: str) -> str:
    """`url` without user-info (`user:password@`), query string and fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<url>"
    if ":" in host.rsplit("]", 1)[-1] and host.count(":") > 1:  # an IPv6 literal
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def clean_urls(value: str) -> str:
    """A comma-separated list of URLs, each cleaned ([`clean_url`])."""
    return ",".join(clean_url(u.strip()) if "://" in u else scrub(u.strip()) for u in value.split(","))


def _secret_env_values() -> list[str]:
    return sorted(
        (v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v.strip()) >= _MIN_ENV_SECRET),
        key=len,
        reverse=True,
    )


def scrub(text: str, _env_secrets: list[str] | None = None) -> str:
    """`text` with every credential this module knows of replaced by `<redacted>` (or dropped, for URL user-info).
    (`_env_secrets`: the secret environment values, read once by [`scrub_value`] for all the strings of a value.)"""
    if not isinstance(text, str) or not text:
        return text
    for value in _secret_env_values() if _env_secrets is None else _env_secrets:
        text = text.replace(value, REDACTED)
    text = _URL.sub(lambda m: clean_url(m.group(0)) if "@" in m.group(0) or _SECRET_PARAM.search(m.group(0))
                    else m.group(0), text)
    text = _SECRET_PARAM.sub(r"\1" + REDACTED, text)
    text = _USERINFO.sub(r"\1", text)  # what the URL pattern could not parse
    text = _HF_TOKEN.sub(REDACTED, text)
    text = _OPENAI_KEY.sub(REDACTED, text)
    text = _BEARER.sub(r"\1" + REDACTED, text)
    return _AUTH_HEADER.sub(r"\1" + REDACTED, text)


def scrub_value(value, key: str | None = None, *, by_name: bool = True, _env_secrets: list[str] | None = None):
    """A copy of a JSON-like value (dicts, lists, strings) with every string scrubbed. With `by_name`, a string under
    a key whose name says it is a secret (`api_key`, `Authorization`, ...) becomes `<redacted>` (empty values and
    `*_env` names of environment variables stay as they are)."""
    if _env_secrets is None:  # the environment is read once per value, not once per string (a trace holds hundreds)
        _env_secrets = _secret_env_values()
    if isinstance(value, str):
        if by_name and key is not None and SECRET_NAME.search(key) and value and not key.endswith("_env"):
            return REDACTED
        return scrub(value, _env_secrets)
    if isinstance(value, Mapping):
        return {k: scrub_value(v, str(k), by_name=by_name, _env_secrets=_env_secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_value(v, by_name=by_name, _env_secrets=_env_secrets) for v in value)
    return value


def scrub_message(error: BaseException | str) -> str:
    """An error message, scrubbed: what the command line prints."""
    return scrub(str(error).strip() or type(error).__name__)
