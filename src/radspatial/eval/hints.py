"""What to do about a run's failed calls: one hint that fits the errors, and whether rerunning
the same command can help (it resumes, so a timeout or a busy server may answer next time; a
missing key, an unknown model or a rejected request fail again the same way).

Example:
    >>> hint = failure_hint(["HTTP 401: unauthorized after 1 attempt"], keyed=False)
    >>> hint.text.split(" (")[0], hint.rerun
    ('the server requires a key: pass --api-key-env NAME', False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_STATUS = re.compile(r"^HTTP (\d{3})\b")


@dataclass(frozen=True)
class Hint:
    text: str
    rerun: bool  # True: rerunning the same command (it resumes) may succeed


def _one(error: str, keyed: bool) -> Hint:
    match = _STATUS.match(error)
    status = int(match[1]) if match else None
    if status in (401, 403):
        if keyed:
            text = "the server refused the key: check the variable holding it (--api-key-env "
            return Hint(text + "NAME; openai: reads OPENAI_API_KEY)", False)
        text = "the server requires a key: pass --api-key-env NAME (NAME: the environment "
        return Hint(text + "variable holding it)", False)
    if status == 404:
        return Hint("the server knows no such model or path: check the model name and URL "
                    "(GET <url>/models lists its models)", False)  # fmt: skip
    if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
        return Hint(f"the server rejected the request (HTTP {status}; its message above): "
                    "rerunning sends the same request", False)  # fmt: skip
    if error.startswith("reply body over"):
        return Hint("raise the backend's max_reply_mb", False)
    return Hint("to resume, rerun the same command", True)  # timeouts, 429, 5xx, connections


def failure_hint(errors: Iterable[str], *, keyed: bool) -> Hint:
    """The hint for a run's failed calls: the first that cannot be cured by a rerun (those
    need the command changed), else the rerun hint. ``keyed``: a key was given."""
    hints = [_one(e, keyed) for e in errors]
    fixed = [h for h in hints if not h.rerun]
    return fixed[0] if fixed else Hint("to resume, rerun the same command", True)
