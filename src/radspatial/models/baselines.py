"""Reference backends that need no model: ``baseline:random|yes|no|anatomy-prior|standard-view``.

``baseline:anatomy-prior`` is the reader MIRP describes: it recites patient anatomy, ignoring
the image. From an atlas of typical standard-view centres per structure it answers left/right as
the patient's left/right ("the spleen is to the left of the liver": the spleen lies on the
patient's left) and above/below as anterior/posterior. It reads only what a model could read:
structure names that the question itself contains (RQ1/RQ2); for marker-only questions and
unknown structures it answers at random. High in the anatomical frame, near chance in the image
frame. The atlas is built in (learned from the bundled example CT) or learned from a dataset's
manifest: ``baseline:anatomy-prior@path/to/manifest.jsonl`` (or a folder holding one). SPAR-VQA
types: distance from the atlas centres, orientation "not mirrored", a coin for size, symmetry and
count (the atlas holds no areas). The open types: ``models/baselines_open.py``.

``baseline:standard-view`` is an oracle that sees every structure where it is but ignores the
rotation/flip: it answers the question's words on the standard-view image, from the item's own
standard-view centres (the manifest's ``center_xy_canonical`` or MIRP's centres file; the atlas
where those are missing). 100% in the standard frame by construction; how it scores in the image
frame shows what ignoring the view costs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from radspatial.core.labels import side_of
from radspatial.models.base import Decoding, OnReply, Reply, Request, register_backend
from radspatial.questions.distance import distance_holds
from radspatial.questions.open_common import is_open
from radspatial.questions.relative_position import anatomical_holds, relation_holds

KINDS = ("random", "yes", "no", "anatomy-prior", "standard-view")
_ATLAS_KINDS = ("anatomy-prior", "standard-view")
Atlas = dict[str, tuple[float, float]]  # name -> (x, y) in [0, 1], canonical frame


def atlas_from_rows(rows: Iterable[dict]) -> Atlas:
    """Mean canonical-frame centre per structure, normalised by image size."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for row in rows:
        size = float(row.get("image_size") or 512)
        for key in ("object1", "object2"):
            obj = row.get(key) or {}
            name, c = obj.get("name"), obj.get("center_xy_canonical")
            if name and c:
                s = sums[name]
                s[0] += c[0] / size
                s[1] += c[1] / size
                s[2] += 1
    return {n: (s[0] / s[2], s[1] / s[2]) for n, s in sorted(sums.items())}


def builtin_atlas() -> Atlas:
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    return {k: (v[0], v[1]) for k, v in json.loads(text)["centres"].items()}


def load_atlas(source: str) -> Atlas:
    path = Path(source)
    if path.is_dir():
        path = path / "manifest.jsonl"
    if not path.is_file():
        raise ValueError(f"{source}: no manifest.jsonl to learn an anatomy atlas from")
    from radspatial.core.io import read_jsonl

    meta = path.parent / "dataset.json"
    size = json.loads(meta.read_text())["config"]["size"] if meta.is_file() else 512
    atlas = atlas_from_rows({**r, "image_size": size} for r in read_jsonl(path))
    if not atlas:
        raise ValueError(f"{path}: no canonical-frame centres to learn an anatomy atlas from")
    return atlas


def _coin(key: str) -> int:
    return hashlib.sha256(key.encode()).digest()[0] & 1


def _side_guess(name: str) -> tuple[float, float] | None:
    side = side_of(name)  # radiological view: patient's left is on the image right
    return None if side is None else ((0.7, 0.5) if side == "left" else (0.3, 0.5))


class Baseline:
    def __init__(self, spec: str, kind: str, atlas: Atlas | None, atlas_source: str) -> None:
        self.spec, self.kind, self.atlas, self.atlas_source = spec, kind, atlas, atlas_source

    def describe(self) -> dict[str, Any]:
        d = {"spec": self.spec, "backend": "baseline", "kind": self.kind}
        if self.atlas is not None:
            d.update(atlas_source=self.atlas_source, atlas_structures=len(self.atlas))
        return d

    def answer(self, req: Request) -> str:
        if is_open(req.meta.get("question_type")):
            from radspatial.models.baselines_open import open_answer

            return open_answer(self.kind, req.key, req.meta, self.atlas or {}, req.image_png)
        if self.kind == "yes":
            return "1"
        if self.kind == "no":
            return "0"
        if self.kind in _ATLAS_KINDS:
            prior = self._prior(req.meta)
            if prior is not None:
                return str(prior)
        return str(_coin(req.key))

    def _prior(self, m: dict[str, Any]) -> int | None:
        """What typical anatomy (anatomy-prior) or the standard view (standard-view) says; None
        where it says nothing (size, count: the atlas holds no areas)."""
        kind, rel = m.get("question_type", "relative_position"), m.get("relation")
        if kind == "orientation":
            return 0  # a reader who assumes the standard view never sees a mirror image
        names = [m.get(k) for k in ("object1", "object2", "object3")]
        centres = [(self.atlas.get(n) or _side_guess(n)) if n else None for n in names]
        c1, c2, c3 = centres
        if kind == "relative_position" and rel and self.kind == "standard-view":
            seen = m.get("center1_canonical"), m.get("center2_canonical")
            if seen[0] and seen[1]:  # the oracle: this item's own standard-view centres
                return int(relation_holds(rel, tuple(seen[0]), tuple(seen[1])))
            if c1 and c2 and c1 != c2:
                return int(relation_holds(rel, c1, c2))
            return None
        if kind == "relative_position" and rel and c1 and c2 and c1 != c2:
            return int(anatomical_holds(rel, c1, c2))
        if kind == "distance" and rel and c1 and c2 and c3:
            return int(distance_holds(rel, math.dist(c1, c2), math.dist(c1, c3)))
        return None

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        for req in requests:
            on_reply(req, Reply(text=self.answer(req), latency_s=0.0))


@register_backend("baseline")
def _baseline(rest: str, *, decoding: Decoding, concurrency: int = 1, **_: Any) -> Baseline:
    kind, _, source = rest.partition("@")
    if kind not in KINDS:
        raise ValueError(f"baseline:{rest}: unknown baseline; choose one of {', '.join(KINDS)}")
    if kind not in _ATLAS_KINDS:
        if source:
            raise ValueError(f"baseline:{rest}: only anatomy-prior/standard-view take @atlas")
        return Baseline(f"baseline:{rest}", kind, None, "")
    atlas = load_atlas(source) if source else builtin_atlas()
    return Baseline(f"baseline:{rest}", kind, atlas, source or "built-in")
