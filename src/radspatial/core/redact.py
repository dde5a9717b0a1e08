"""Secrets out of URLs before anything is recorded or printed.

A base URL may carry a password (``http://user:pw@host/v1``) or a key in its query
(``?api_key=...``). ``redact(text)`` replaces both with ``***`` wherever a URL appears in the
text; ``redact_json(obj)`` does so for every string of a JSON-ready object (run.json,
metrics.json). Call keys are hashed from the spec as given, so resume is not affected.

    >>> redact("openai-compat:m@http://user:pw@host/v1?api_key=sk-1&x=2")
    'openai-compat:m@http://***@host/v1?api_key=***&x=2'
"""

from __future__ import annotations

import re
from typing import Any

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]*@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|password|passwd|pwd|secret"
    r"|sig|signature|x-amz-signature|x-amz-credential)=)[^&#\s]*"
)


def redact(text: str) -> str:
    """``text`` with every URL's user:password and secret query values replaced by ``***``."""
    if "://" not in text:
        return text
    return _QUERY_SECRET.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def redact_json(obj: Any) -> Any:
    """``obj`` with :func:`redact` applied to every string (keys and values)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_json(k): redact_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_json(v) for v in obj]
    return obj
