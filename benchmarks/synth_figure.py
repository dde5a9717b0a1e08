"""Figure for the lab notebook (benchmarks/RESULTS.md): real CT slices beside slices
synthesised from label maps.

    .venv/bin/python benchmarks/synth_figure.py --out docs/agent_synth.png

Top row: patient A's real slices (W400 / L40) at three levels, then the same slices' label
maps drawn by ``organs_synth`` (two draws each, seed 0). Bottom row: synthetic slices of the
label-map-only patients (AMOS amos_0013, TotalSegmentator s0327 / s0328), which have no image.
Every tile 128 px, as the network sees them (before the display augmentation).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

from radspatial.core.runtime import keyed_rng
from radspatial.imaging.slices import window_to_uint8
from radspatial.training import organs_data, organs_synth
from radspatial.training import organs_labelmaps as lm

SIZE = 128


def tiles(seed: int) -> list[np.ndarray]:
    names = lm.ts_names()
    vol = organs_data.training_volumes(None, ("a",))[0]
    a_lab = lm.LabelVolume("a", vol.seg, vol.spacing, True, {})
    top, bottom = [], []
    for z in (40, 70, 100):
        hu = organs_data.render_hu(vol.ct, z, vol.spacing, SIZE)
        lab = organs_data.render_lab(vol.seg, z, vol.spacing, SIZE)
        top.append(window_to_uint8(hu, 400, 40))
        for d in range(2):
            rng = keyed_rng(seed, f"figure-a-{z}-{d}")
            top.append(
                window_to_uint8(
                    organs_synth.synth_slice(lab, names, lm.px_mm(a_lab, SIZE), rng)[0], 400, 40
                )
            )
    for name, frac in (
        ("amos", 0.3),
        ("amos", 0.6),
        ("s0327", 0.35),
        ("s0327", 0.6),
        ("s0328", 0.5),
        ("s0328", 0.75),
    ):
        lv = lm.label_volume(name)
        zs = lm.slice_ids(lv, 3.0)
        z = zs[int(frac * (len(zs) - 1))]
        lab = organs_data.render_lab(lv.seg, z, lv.spacing, SIZE)
        rng = keyed_rng(seed, f"figure-{name}-{z}")
        bottom.append(
            window_to_uint8(
                organs_synth.synth_slice(lab, names, lm.px_mm(lv, SIZE), rng, lv.complete)[0],
                400,
                40,
            )
        )
    bottom.append(np.zeros_like(bottom[0]))
    bottom += [np.zeros_like(bottom[0])] * (len(top) - len(bottom))
    return [np.concatenate(top, axis=1), np.concatenate(bottom[: len(top)], axis=1)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs/agent_synth.png"))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rows = tiles(a.seed)
    Image.fromarray(np.concatenate(rows, axis=0)).save(a.out, optimize=True)
    print(a.out)


if __name__ == "__main__":
    main()
