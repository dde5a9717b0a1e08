"""The ``totalsegmentator`` localizer: segment the question's CT volume with TotalSegmentator,
then read centroids from the slice as shown (the mask localizer's logic on a fresh mask).

Needs the question's CT volume and where the image came from: ``Context.ct_path`` plus
``Context.extra["slice_index"]`` (canonical RAS z index, as in the manifest's ``source``) and
``Context.extra["transform"]`` (the MIRP variant code of the shown image). Evaluating a dataset
made by ``radspatial generate`` passes all three.

TotalSegmentator is optional and imported only here: ``pip install TotalSegmentator``; it fetches
its weights on first use, which this project's build machines cannot do, so tests run the same
path on an existing TotalSegmentator output (``Context.extra["seg_path"]``, also useful when you
already have one). Segmentations are cached per user (``$XDG_CACHE_HOME/radspatial/totalseg``,
default ``~/.cache/radspatial/totalseg``, mode 0700), keyed by the sha256 of the CT's content, so
a renamed copy hits the cache and an edited file at the same path does not.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from radspatial.agent.localizers.mask.mask_localizer import MaskLocalizer
from radspatial.agent.pipeline.types import Context, Found, Ref, register_localizer
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.imaging.slices import Geometry, Variant, render_labels, to_display


def run_totalsegmentator(ct: Path, out: Path, *, fast: bool, device: str) -> Path:
    """Multilabel TotalSegmentator v2 "total" mask of ``ct`` written to ``out``."""
    try:
        from totalsegmentator.python_api import totalsegmentator
    except ImportError:
        raise ImportError(
            "the totalsegmentator localizer needs TotalSegmentator: pip install TotalSegmentator "
            "(its weights are downloaded on first use), or pass an existing TotalSegmentator "
            "output as Context.extra['seg_path']"
        ) from None
    totalsegmentator(str(ct), str(out), ml=True, fast=fast, device=device, quiet=True)
    return out


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/radspatial/totalseg`` (default ``~/.cache``): per user, never /tmp."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "radspatial" / "totalseg"


def content_key(ct: Path) -> str:
    """sha256 of a CT file's bytes, or of a DICOM folder's file names and bytes (sorted).

    Remembered per (path, size, mtime) within the process: each question asks again.
    """
    ct = Path(ct)
    files = sorted(p for p in ct.rglob("*") if p.is_file()) if ct.is_dir() else [ct]
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _content_key(str(ct), stamp)


@lru_cache(maxsize=64)
def _content_key(ct: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for name, _, _ in stamp:
        if name != ct:  # a folder: the file's name inside it counts too
            h.update(os.path.relpath(name, ct).encode() + b"\0")
        with open(name, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=4)
def _volume(ct: str, seg: str):
    # imported here: nibabel's import is most of the agent's start-up, and only this
    # localizer reads volumes (every ``Agent`` imports the localizer registry)
    from radspatial.imaging.volumes import Case, load_case

    return load_case(Case("question", Path(ct), Path(seg)))


def shown_mask(
    ct: Path, seg: Path, slice_index: int, transform: str, size: int, plane: str = DEFAULT_PLANE
):
    """The label image of one slice of ``plane``, rendered exactly like the generator's PNG."""
    from radspatial.imaging.planes import reformat

    vol = reformat(_volume(str(ct), str(seg)), plane)
    geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], size)
    lab = render_labels(to_display(vol.seg[:, :, slice_index]), geom)
    return Variant(transform).apply_image(lab), vol.table.names


class TotalSegLocalizer:
    name = "totalsegmentator"
    reads_truth = True  # the CT, the slice index and the shown transform (Request.truth)
    thread_safe = False  # not declared safe (a TotalSegmentator run per CT): a server locks it

    def __init__(self, *, fast: bool = True, device: str = "cpu", cache_dir: Path | None = None):
        self.fast, self.device = fast, device
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self._lock = threading.Lock()

    def cache_path(self, ct: Path) -> Path:
        return self.cache_dir / f"{content_key(ct)}_{'fast' if self.fast else 'full'}.nii.gz"

    def _segmentation(self, ct: Path) -> Path:
        out = self.cache_path(ct)
        with self._lock:
            if not out.is_file():
                self.cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(suffix=".nii.gz", dir=self.cache_dir)
                os.close(fd)
                try:
                    run_totalsegmentator(Path(ct), Path(tmp), fast=self.fast, device=self.device)
                    os.replace(tmp, out)
                finally:
                    Path(tmp).unlink(missing_ok=True)
        return out

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        extra = context.extra
        if not context.ct_path or "slice_index" not in extra or not extra.get("transform"):
            raise ValueError(
                "the totalsegmentator localizer needs the CT volume, its slice index and the "
                "shown transform (Context.ct_path, extra['slice_index'], extra['transform'])"
            )
        seg = Path(extra["seg_path"]) if extra.get("seg_path") else None
        seg = seg or self._segmentation(Path(context.ct_path))
        mask, names = shown_mask(
            Path(context.ct_path), seg, int(extra["slice_index"]), extra["transform"],
            image.shape[1], extra.get("plane") or DEFAULT_PLANE,
        )  # fmt: skip
        found = MaskLocalizer().locate(image, refs, Context(mask=mask, labels=names))
        return [
            None if f is None else Found(f.xy, f.score, "totalsegmentator", f.details)
            for f in found
        ]


@register_localizer("totalsegmentator")
def _totalseg(**options: object) -> TotalSegLocalizer:
    return TotalSegLocalizer(**options)
