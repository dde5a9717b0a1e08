"""What the reference baselines answer to the open question types (``models/baselines.py``).

- ``random``: a uniform pick among the type's answer classes (identification: among the named
  structures of the slice, the item's ``options``), by a hash of the call key: at chance.
- ``yes`` / ``no``: a constant answer, the first / last class (identification: the first / last
  option): at chance where the classes are balanced.
- ``anatomy-prior``: the patient's anatomy from the atlas, ignoring the view: laterality is the
  side of the patient the structure typically lies on, direction the typical patient-frame
  direction (left/right the patient's, above/below anterior/posterior); a pick at random where it
  has nothing to go on (marker-only questions, counts, identification).
- ``standard-view``: the item's own standard-view centres, ignoring the rotation/flip (100% in
  the standard frame on laterality and direction); a random pick on counts and identification.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from radspatial.questions.direction import anatomical_direction, direction_of
from radspatial.questions.open_common import DIRECTIONS, SIDES

CLASSES: dict[str, tuple] = {"laterality": SIDES, "direction": DIRECTIONS, "counting": (1, 2, 3)}


def _pick(key: str, options: list | tuple) -> Any:
    return options[int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % len(options)]


def _width(png: bytes | None) -> float:
    if png and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) >= 24:
        return float(struct.unpack(">I", png[16:20])[0])
    return 512.0


def open_answer(kind: str, key: str, meta: dict[str, Any], atlas: dict, png: bytes | None) -> str:
    """The reply text of baseline ``kind`` to an open item."""
    qtype = meta["question_type"]
    options = list(CLASSES.get(qtype) or meta.get("options") or ["unknown"])
    if kind in ("yes", "no"):
        return str(options[0] if kind == "yes" else options[-1])
    value = None
    if kind == "anatomy-prior":
        c1, c2 = (atlas.get(meta.get(k)) if meta.get(k) else None for k in ("object1", "object2"))
        if qtype == "laterality" and c1:
            value = "left" if c1[0] > 0.5 else "right"  # patient's left: image right (standard)
        elif qtype == "direction" and c1 and c2 and c1 != c2:
            value = anatomical_direction(c1, c2)
    elif kind == "standard-view":
        s1, s2 = meta.get("center1_canonical"), meta.get("center2_canonical")
        if qtype == "laterality" and s1:
            value = "left" if s1[0] < _width(png) / 2 else "right"
        elif qtype == "direction" and s1 and s2:
            value = direction_of(tuple(s1), tuple(s2))
    return str(value if value is not None else _pick(key, options))
