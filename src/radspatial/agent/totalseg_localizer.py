"""The ``totalsegmentator`` localizer: segment the question's CT volume with TotalSegmentator,
then read centroids from the slice as shown (the mask localizer's logic on a fresh mask).

Needs the question's CT volume and where the image came from: ``Context.ct_path`` plus
``Context.extra["slice_index"]`` (canonical RAS z index, as in the manifest's ``source``) and
``Context.extra["transform"]`` (the MIRP variant code of the shown image). Evaluating a dataset
made by ``radspatial generate`` passes all three.

TotalSegmentator is optional and imported only here: ``pip install TotalSegmentator``; it fetches
its weights on first use, which this project's build machines cannot do, so tests run the same
path on an existing TotalSegmentator output (``Context.extra["seg_path"]``, also useful when you
already have one). Segmentations are cached per CT file.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from radspatial.agent.mask_localizer import MaskLocalizer
from radspatial.agent.types import Context, Found, Ref, register_localizer
from radspatial.slices import Geometry, Variant, render_labels, to_display
from radspatial.volumes import Case, load_case


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


@lru_cache(maxsize=4)
def _volume(ct: str, seg: str):
    return load_case(Case("question", Path(ct), Path(seg)))


def shown_mask(ct: Path, seg: Path, slice_index: int, transform: str, size: int):
    """The label image of one axial slice, rendered exactly like the generator's PNG."""
    vol = _volume(str(ct), str(seg))
    geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], size)
    lab = render_labels(to_display(vol.seg[:, :, slice_index]), geom)
    return Variant(transform).apply_image(lab), vol.table.names


class TotalSegLocalizer:
    name = "totalsegmentator"

    def __init__(self, *, fast: bool = True, device: str = "cpu", cache_dir: Path | None = None):
        self.fast, self.device = fast, device
        self.cache_dir = Path(cache_dir or Path(tempfile.gettempdir()) / "radspatial_totalseg")
        self._lock = threading.Lock()

    def _segmentation(self, ct: Path) -> Path:
        key = hashlib.sha256(str(Path(ct).resolve()).encode()).hexdigest()[:16]
        out = self.cache_dir / f"{key}_{'fast' if self.fast else 'full'}.nii.gz"
        with self._lock:
            if not out.is_file():
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                tmp = out.with_suffix(".tmp.nii.gz")
                run_totalsegmentator(Path(ct), tmp, fast=self.fast, device=self.device)
                tmp.replace(out)
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
            image.shape[1],
        )  # fmt: skip
        found = MaskLocalizer().locate(image, refs, Context(mask=mask, labels=names))
        return [
            None if f is None else Found(f.xy, f.score, "totalsegmentator", f.details)
            for f in found
        ]


@register_localizer("totalsegmentator")
def _totalseg(**options: object) -> TotalSegLocalizer:
    return TotalSegLocalizer(**options)
