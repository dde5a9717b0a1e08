"""docs/phantoms.png: phantom slices beside a slice of the real TotalSegmentator example CT.

Everything is rendered with the generator's own functions (``to_display``, ``Geometry``,
``render_gray`` at W400/L40), so the figure shows exactly what benchmark images look like.
Run: ``python -m radspatial.phantoms.figure docs/phantoms.png``.
"""

from __future__ import annotations

import colorsys
import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from radspatial.core.io import atomic_write_bytes
from radspatial.imaging.slices import Geometry, render_gray, render_labels, to_display
from radspatial.imaging.volumes import Case, load_case
from radspatial.phantoms.build import Phantom, make_phantom

WINDOW = (400.0, 40.0)
CAPTION_PX = 18


def _spacing(affine: np.ndarray) -> np.ndarray:
    return np.linalg.norm(affine[:3, :3], axis=0)


def _tile(ct: np.ndarray, affine: np.ndarray, z: int, size: int) -> np.ndarray:
    geom = Geometry.for_slice(ct.shape[:2], tuple(_spacing(affine)[:2]), size)
    gray = render_gray(to_display(ct[:, :, z]), geom, WINDOW)
    return np.repeat(gray[:, :, None], 3, axis=2)


def _overlay(ph: Phantom, z: int, size: int) -> np.ndarray:
    """Gray slice with each label in its own colour (golden-ratio hues), half transparent."""
    geom = Geometry.for_slice(ph.seg.shape[:2], tuple(_spacing(ph.affine)[:2]), size)
    rgb = _tile(ph.ct, ph.affine, z, size).astype(np.float32)
    lab = render_labels(to_display(ph.seg[:, :, z]), geom)
    hues = [colorsys.hsv_to_rgb((i * 0.618) % 1.0, 0.75, 1.0) for i in range(256)]
    palette = (np.array(hues) * 255).astype(np.float32)
    on = lab > 0
    rgb[on] = 0.45 * rgb[on] + 0.55 * palette[lab[on] % 256]
    return rgb.astype(np.uint8)


def _largest(seg: np.ndarray, labels: list[int]) -> int:
    """The slice where ``labels`` cover the most voxels."""
    return int(np.argmax(np.isin(seg, labels).sum(axis=(0, 1))))


def _captioned(img: np.ndarray, text: str) -> np.ndarray:
    band = Image.new("RGB", (img.shape[1], CAPTION_PX), (255, 255, 255))
    ImageDraw.Draw(band).text((4, 3), text, fill=(0, 0, 0))
    return np.concatenate([np.asarray(band), img], axis=0)


def phantom_figure(out: Path, *, seed: int = 0, size: int = 256) -> Path:
    """Two rows of four tiles; returns ``out``. Takes about a minute (four full phantoms)."""
    from radspatial.core.runtime import bundled_example

    ct_path, seg_path = bundled_example()
    real = load_case(Case("example", ct_path, seg_path))
    z_real = _largest(real.seg, [2, 3])  # kidneys
    a = make_phantom("figure_a", seed=seed)
    b = make_phantom("figure_b", seed=seed)
    si = make_phantom("figure_a", seed=seed, variant="situs_inversus")
    dx = make_phantom("figure_a", seed=seed, variant="displaced")
    z_kid, z_upper = _largest(a.seg, [2, 3]), _largest(a.seg, [1, 6])  # kidneys; spleen, stomach
    z_pelvis, z_mass = _largest(a.seg, [21]), _largest(dx.seg, [200])
    organ = dx.meta["variant_details"]["organ"].replace("_", " ")
    tiles = [
        (_tile(real.ct, real.affine, z_real, size), "real CT (TotalSegmentator example)"),
        (_tile(a.ct, a.affine, z_kid, size), "phantom A, kidneys"),
        (_tile(b.ct, b.affine, _largest(b.seg, [2, 3]), size), "phantom B, kidneys"),
        (_overlay(a, z_kid, size), "phantom A, TotalSegmentator labels"),
        (_tile(a.ct, a.affine, z_upper, size), "phantom A, upper abdomen"),
        (_tile(si.ct, si.affine, z_upper, size), "A, situs inversus"),
        (_tile(dx.ct, dx.affine, z_mass, size), f"A, displaced: mass at {organ}"),
        (_tile(a.ct, a.affine, z_pelvis, size), "phantom A, pelvis"),
    ]
    framed = [_captioned(img, text) for img, text in tiles]
    rows = [np.concatenate(framed[i : i + 4], axis=1) for i in (0, 4)]
    grid = np.concatenate(rows, axis=0)
    buf = io.BytesIO()
    Image.fromarray(grid).save(buf, format="PNG", optimize=True)
    atomic_write_bytes(Path(out), buf.getvalue())
    return Path(out)


if __name__ == "__main__":
    phantom_figure(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/phantoms.png"))
