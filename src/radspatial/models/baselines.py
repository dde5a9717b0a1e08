"""Reference backends that need no model: ``baseline:random|yes|no|anatomy-prior|standard-view``.

``baseline:anatomy-prior`` is the reader MIRP describes: it recites patient anatomy, ignoring
the image. From an atlas of typical standard-view centres per structure it answers left/right as
the patient's left/right ("the spleen is to the left of the liver": the spleen lies on the
patient's left) and above/below as anterior/posterior. It reads only what a model could read:
structure names that the question itself contains (RQ1/RQ2); for marker-only questions and
unknown structures it answers at random. High in the anatomical frame, near chance in the image
frame. The atlas is built in (learned from the bundled example CT) or learned from a dataset's
manifest: ``baseline:anatomy-prior@path/to/manifest.jsonl`` (or a folder holding one). Coronal
and sagittal items (``docs/planes.md``) are read with one atlas per plane (standard-view
centres of that plane's slices: superior/inferior, anterior/posterior); the built-in ones are
learned from patient A's full scan (``benchmarks/build_plane_atlas.py``).

``baseline:standard-view`` is an oracle that sees every structure where it is but ignores the
rotation/flip: it answers the question's words on the standard-view image, from the item's own
standard-view centres (the manifest's ``center_xy_canonical`` or MIRP's centres file; the atlas
where those are missing). 100% in the standard frame by construction; how it scores in the image
frame shows what ignoring the view costs.

What either says of a question is its type's ``prior`` (``radspatial.questions``; e.g. distance
from the atlas centres, orientation "not mirrored"); where it says nothing (size, count: the atlas
holds no areas) the answer is a coin, or for the open types a pick at random among the type's
answer classes (identification: the item's ``options``). ``random`` picks the same way; ``yes``
and ``no`` answer 1 and 0, or the first and the last class.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections import defaultdict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from radspatial.models.base import Decoding, OnReply, Reply, Request, register_backend
from radspatial.questions import QUESTION_TYPES, PriorInput, answer_classes
from radspatial.questions.open_common import is_open

KINDS = ("random", "yes", "no", "anatomy-prior", "standard-view")
_ATLAS_KINDS = ("anatomy-prior", "standard-view")
Atlas = dict[str, tuple[float, float]]  # name -> (x, y) in [0, 1], canonical frame


def plane_atlases_from_rows(rows: Iterable[dict]) -> dict[str, Atlas]:
    """One atlas per plane (rows without ``plane``: axial)."""
    by_plane: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_plane[row.get("plane") or "axial"].append(row)
    return {plane: atlas_from_rows(rs) for plane, rs in sorted(by_plane.items())}


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


def builtin_plane_atlases() -> dict[str, Atlas]:
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    planes = json.loads(text).get("planes", {})
    return {p: {k: (v[0], v[1]) for k, v in a.items()} for p, a in planes.items()}


def builtin_atlases() -> dict[str, Atlas]:
    """The shipped atlas of every plane (axial: MIRP's centres)."""
    return {"axial": builtin_atlas(), **builtin_plane_atlases()}


def load_atlas(source: str) -> dict[str, Atlas]:
    """The atlas of each plane, learned from a dataset's manifest."""
    path = Path(source)
    if path.is_dir():
        path = path / "manifest.jsonl"
    if not path.is_file():
        raise ValueError(f"{source}: no manifest.jsonl to learn an anatomy atlas from")
    from radspatial.core.io import read_jsonl

    meta = path.parent / "dataset.json"
    size = json.loads(meta.read_text())["config"]["size"] if meta.is_file() else 512
    atlas = plane_atlases_from_rows({**r, "image_size": size} for r in read_jsonl(path))
    if not any(atlas.values()):
        raise ValueError(f"{path}: no canonical-frame centres to learn an anatomy atlas from")
    return atlas


def _coin(key: str) -> int:
    return hashlib.sha256(key.encode()).digest()[0] & 1


def _pick(key: str, options: list | tuple) -> Any:
    return options[int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % len(options)]


def _width(png: bytes | None) -> float:
    if png and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) >= 24:
        return float(struct.unpack(">I", png[16:20])[0])
    return 512.0


class Baseline:
    def __init__(
        self, spec: str, kind: str, atlas: dict[str, Atlas] | None, atlas_source: str
    ) -> None:
        self.spec, self.kind, self.atlas_source = spec, kind, atlas_source
        self.planes = atlas  # plane -> atlas
        self.reads_truth = kind == "standard-view"  # the item's true standard-view centres
        self.atlas = None if atlas is None else atlas.get("axial", {})

    def describe(self) -> dict[str, Any]:
        d = {"spec": self.spec, "backend": "baseline", "kind": self.kind}
        if self.atlas is not None:
            d.update(atlas_source=self.atlas_source, atlas_structures=len(self.atlas))
        return d

    def answer(self, req: Request) -> str:
        qtype = req.meta.get("question_type")
        if is_open(qtype):
            options = list(answer_classes(qtype) or req.meta.get("options") or ["unknown"])
            if self.kind in ("yes", "no"):
                return str(options[0] if self.kind == "yes" else options[-1])
            value = self._prior(req)
            return str(value if value is not None else _pick(req.key, options))
        if self.kind == "yes":
            return "1"
        if self.kind == "no":
            return "0"
        prior = self._prior(req)
        return str(prior if prior is not None else _coin(req.key))

    def _prior(self, req: Request) -> int | str | None:
        """What the question's type says typical anatomy (anatomy-prior) or the standard view
        (standard-view) answers; None for the other baselines or where it says nothing."""
        name = req.meta.get("question_type", "relative_position")
        if self.kind not in _ATLAS_KINDS or name not in QUESTION_TYPES:
            return None
        atlas = (self.planes or {}).get(req.meta.get("plane") or "axial", {})
        given = PriorInput(self.kind, {**req.meta, **req.truth}, atlas, _width(req.image_png))
        return QUESTION_TYPES.get(name).prior(given)

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
    atlas = load_atlas(source) if source else builtin_atlases()
    return Baseline(f"baseline:{rest}", kind, atlas, source or "built-in")
