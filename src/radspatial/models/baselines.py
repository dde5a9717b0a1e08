"""Reference backends that need no model: ``baseline:random|yes|no|anatomy-prior|standard-view``.

``baseline:anatomy-prior`` is the reader MIRP describes: it recites patient anatomy, ignoring
the image. From an atlas of typical standard-view centres per structure it answers left/right as
the patient's left/right ("the spleen is to the left of the liver": the spleen lies on the
patient's left) and above/below as anterior/posterior. It reads only what a model could read:
structure names that the question itself contains (RQ1/RQ2); for marker-only questions and
unknown structures it answers at random. High in the anatomical frame, near chance in the image
frame. The atlas is built in (learned from six patients' label maps:
``benchmarks/build_anatomy_prior.py``) or learned from a dataset's
manifest: ``baseline:anatomy-prior@path/to/manifest.jsonl`` (or a folder holding one). Coronal
and sagittal items (``docs/planes.md``) are read with one atlas per plane (standard-view
centres of that plane's slices: superior/inferior, anterior/posterior); the built-in ones are
learned from the same anatomies (patient C's 3 slices serve the axial plane only). On those planes a
pair is read first from its *pair offset*: the mean standard-view difference of the two centres
over the slices that show both (weighted by the smaller area), i.e. where the pair lies when a
question can name both. Typical centres learned over every slice of each structure alone
mislead for structures on the same side (the liver's centre on a coronal slice moves from the
right flank to the midline from back to front); a pair never seen together falls back to the
centres. Axial keeps MIRP's reader: centres only.

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

import json
import struct
from collections import defaultdict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from radspatial.core.records import DEFAULT_TYPE
from radspatial.imaging.planes import DEFAULT_PLANE, PLANES
from radspatial.models.base import Decoding, OnReply, Reply, Request, register_backend
from radspatial.questions import QUESTION_TYPES, PriorInput
from radspatial.questions.guesses import Guesses

KINDS = ("random", "yes", "no", "anatomy-prior", "standard-view")
_ATLAS_KINDS = ("anatomy-prior", "standard-view")
Atlas = dict[str, tuple[float, float]]  # name -> (x, y) in [0, 1], canonical frame
PairAtlas = dict[tuple[str, str], tuple[float, float]]  # (a, b) -> mean centre(a) - centre(b)
Seen = tuple[str, float, float, float]  # one structure on one slice: name, x, y, weight
# every plane but MIRP's (axial keeps MIRP's reader: centres only) gets pair offsets
_PAIR_PLANES = tuple(p for p in PLANES if p != DEFAULT_PLANE)


def plane_atlases_from_rows(rows: Iterable[dict]) -> dict[str, Atlas]:
    """One atlas per plane (rows without ``plane``: axial)."""
    by_plane: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_plane[row.get("plane") or DEFAULT_PLANE].append(row)
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


def pair_offsets(slices: Iterable[Sequence[Seen]]) -> PairAtlas:
    """Per ordered pair of structures seen on the same slice, the mean of centre(a) - centre(b)
    (normalised coordinates), each slice weighted by the smaller of the two weights (areas)."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for seen in slices:
        for i, (a, xa, ya, wa) in enumerate(seen):
            for b, xb, yb, wb in seen[i + 1 :]:
                if a == b:
                    continue
                w = min(wa, wb)
                s = sums[(a, b) if a < b else (b, a)]
                sign = 1.0 if a < b else -1.0
                s[0] += w * sign * (xa - xb)
                s[1] += w * sign * (ya - yb)
                s[2] += w
    out: PairAtlas = {}
    for (a, b), (dx, dy, w) in sorted(sums.items()):
        if w > 0:
            out[(a, b)] = (dx / w, dy / w)
            out[(b, a)] = (-dx / w, -dy / w)
    return out


def plane_pairs_from_rows(rows: Iterable[dict]) -> dict[str, PairAtlas]:
    """Pair offsets per coronal/sagittal plane from manifest rows (each item: one slice)."""
    by_plane: dict[str, list[list[Seen]]] = defaultdict(list)
    for row in rows:
        plane = row.get("plane") or DEFAULT_PLANE
        if plane not in _PAIR_PLANES:
            continue
        size = float(row.get("image_size") or 512)
        seen = []
        for key in ("object1", "object2"):
            obj = row.get(key) or {}
            c = obj.get("center_xy_canonical")
            if obj.get("name") and c:
                area = float(obj.get("area_px") or 1.0)
                seen.append((obj["name"], c[0] / size, c[1] / size, area))
        by_plane[plane].append(seen)
    return {plane: pair_offsets(s) for plane, s in sorted(by_plane.items())}


def _pairs_from_json(table: dict[str, Any]) -> PairAtlas:
    out: PairAtlas = {}
    for key, (dx, dy) in table.items():
        a, _, b = key.partition("|")
        out[(a, b)], out[(b, a)] = (dx, dy), (-dx, -dy)
    return out


def builtin_plane_pairs() -> dict[str, PairAtlas]:
    """The shipped pair offsets of the coronal and sagittal planes."""
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    tables = json.loads(text).get("plane_pairs", {})
    return {p: _pairs_from_json(t) for p, t in tables.items()}


def builtin_anatomies() -> int:
    """How many patients' anatomies the built-in atlas averages (build_anatomy_prior.py)."""
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    return int(json.loads(text).get("anatomies", 2))


def builtin_atlas() -> Atlas:
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    return {k: (v[0], v[1]) for k, v in json.loads(text)["centres"].items()}


def builtin_plane_atlases() -> dict[str, Atlas]:
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    planes = json.loads(text).get("planes", {})
    return {p: {k: (v[0], v[1]) for k, v in a.items()} for p, a in planes.items()}


def builtin_atlases() -> dict[str, Atlas]:
    """The shipped atlas of every plane (axial: MIRP's centres)."""
    return {DEFAULT_PLANE: builtin_atlas(), **builtin_plane_atlases()}


def load_atlas(source: str) -> dict[str, Atlas]:
    """The atlas of each plane, learned from a dataset's manifest."""
    return _load_manifest_atlas(source)[0]


def _load_manifest_atlas(source: str) -> tuple[dict[str, Atlas], dict[str, PairAtlas]]:
    path = Path(source)
    if path.is_dir():
        path = path / "manifest.jsonl"
    if not path.is_file():
        raise ValueError(f"{source}: no manifest.jsonl to learn an anatomy atlas from")
    from radspatial.core.io import read_jsonl

    meta = path.parent / "dataset.json"
    size = json.loads(meta.read_text())["config"]["size"] if meta.is_file() else 512
    rows = [{**r, "image_size": size} for r in read_jsonl(path)]
    atlas = plane_atlases_from_rows(rows)
    if not any(atlas.values()):
        raise ValueError(f"{path}: no canonical-frame centres to learn an anatomy atlas from")
    return atlas, plane_pairs_from_rows(rows)


def _question_type(name: str | None) -> Guesses:
    """The item's type; a name no type claims is asked as a yes/no type."""
    return QUESTION_TYPES.get(name) if name in QUESTION_TYPES else Guesses()


def _width(png: bytes | None) -> float:
    if png and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) >= 24:
        return float(struct.unpack(">I", png[16:20])[0])
    return 512.0


class Baseline:
    def __init__(
        self,
        spec: str,
        kind: str,
        atlas: dict[str, Atlas] | None,
        atlas_source: str,
        pairs: dict[str, PairAtlas] | None = None,
    ) -> None:
        self.spec, self.kind, self.atlas_source = spec, kind, atlas_source
        self.planes = atlas  # plane -> atlas
        self.pairs = pairs or {}  # plane -> pair offsets (coronal, sagittal)
        self.reads_truth = kind == "standard-view"  # the item's true standard-view centres
        # yes/no answer without a coin; the others toss one (keyed by the call) where their
        # prior says nothing, so their runs differ
        self.deterministic = kind in ("yes", "no")
        self.atlas = None if atlas is None else atlas.get(DEFAULT_PLANE, {})

    def describe(self) -> dict[str, Any]:
        d = {"spec": self.spec, "backend": "baseline", "kind": self.kind}
        if self.atlas is not None:
            d.update(atlas_source=self.atlas_source, atlas_structures=len(self.atlas))
            if self.atlas_source == "built-in":
                d["atlas_anatomies"] = builtin_anatomies()
        return d

    def answer(self, req: Request) -> str:
        qtype = _question_type(req.meta.get("question_type"))
        options = qtype.answer_options(req.meta)  # the "yes" one first: 1, 0 for yes/no
        if self.kind in ("yes", "no"):
            return str(options[0] if self.kind == "yes" else options[-1])
        prior = self._prior(req)
        return str(prior if prior is not None else qtype.chance_answer(req.key, options))

    def _prior(self, req: Request) -> int | str | None:
        """What the question's type says typical anatomy (anatomy-prior) or the standard view
        (standard-view) answers; None for the other baselines or where it says nothing."""
        name = req.meta.get("question_type") or DEFAULT_TYPE
        if self.kind not in _ATLAS_KINDS or name not in QUESTION_TYPES:
            return None
        plane = req.meta.get("plane") or DEFAULT_PLANE
        atlas = (self.planes or {}).get(plane, {})
        pairs = self.pairs.get(plane, {})
        known = {**req.meta, **req.truth}  # the truth: standard-view only (``reads_truth``)
        given = PriorInput(self.kind, known, atlas, _width(req.image_png), pairs)
        return QUESTION_TYPES.get(name).prior(given)

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        for req in requests:
            on_reply(req, Reply(text=self.answer(req), latency_s=0.0))


@register_backend("baseline", oracles=("standard-view",))
def _baseline(rest: str, *, decoding: Decoding, concurrency: int = 1) -> Baseline:
    kind, _, source = rest.partition("@")
    if kind not in KINDS:
        raise ValueError(f"baseline:{rest}: unknown baseline; choose one of {', '.join(KINDS)}")
    if kind not in _ATLAS_KINDS:
        if source:
            raise ValueError(f"baseline:{rest}: only anatomy-prior/standard-view take @atlas")
        return Baseline(f"baseline:{rest}", kind, None, "")
    if source:
        atlas, pairs = _load_manifest_atlas(source)
    else:
        atlas, pairs = builtin_atlases(), builtin_plane_pairs()
    return Baseline(f"baseline:{rest}", kind, atlas, source or "built-in", pairs)
