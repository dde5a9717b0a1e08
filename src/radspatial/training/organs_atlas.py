"""Build the ``organs+atlas`` localizer's atlas from the training patients' labelled slices.

    python -m radspatial.training.organs_atlas --out src/radspatial/data/organs --volumes a,c
    python -m radspatial.training.organs_atlas --out runs/atlas6 \\
        --volumes a,c,amos,s0327,s0328,mr   # every anatomy (issue #34: not shipped)

Every slice with a label of each training volume with an image (``a``, ``c``;
:func:`organs_data.banks`, at the network's 128 px in the generator's display geometry) is
shown at W400 / L40, cut to the body's box and resized to the atlas grid
(:data:`radspatial.nets.atlas_grid.SIZE`); its grey is stored as ranks within
the body, its labels as grouped label ids (``UNKNOWN`` where the patient is only partially
labelled), with the label ids each patient labels at all. Written atomically: ``atlas.npz``
(compressed) and ``atlas.json`` (volumes and their sha256, slices, size, command, the npz's sha256,
and ``anatomies``: how many patients). Nothing here runs at inference.

Label-map patients without an image (``amos``, ``s0327``, ``s0328``, ``mr``:
``organs_labelmaps``) join with slices about ``--step-mm`` (6) apart; their grey is the
deterministic typical image of the label slice (``organs_synth.mean_slice``: every class at
its measured mean HU, a drawn body outline), and the pixels a partial map does not label are
unknown.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np

from radspatial.core.io import atomic_write_bytes, atomic_write_json, sha256_file
from radspatial.imaging.body import body_of
from radspatial.imaging.slices import window_to_uint8
from radspatial.nets import atlas_grid
from radspatial.training import organs_data, organs_labelmaps, organs_synth

RENDER_SIZE = 128  # the organs network's input size: the query is normalised from it
WINDOW = (400.0, 40.0)


def atlas_slices(hu: np.ndarray, lab: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(rank grey, label ids) of one 128 px slice on the atlas grid; None without a body."""
    grey = window_to_uint8(hu.astype(np.float32), *WINDOW)
    body = body_of(grey)
    box = atlas_grid.body_box(body)
    if box is None:
        return None
    small_body = atlas_grid.crop_resize(body.astype(np.uint8), box, nearest=True) > 0
    rank = atlas_grid.rank_image(atlas_grid.crop_resize(grey, box, nearest=False), small_body)
    ids = np.where(lab == organs_data.IGNORE, atlas_grid.UNKNOWN, lab).astype(np.uint8)
    return rank, atlas_grid.crop_resize(ids, box, nearest=True)


def _known_row(seg: np.ndarray) -> tuple[np.ndarray, list[int]]:
    ids = np.unique(seg)
    ids = ids[(ids != organs_data.IGNORE) & (ids < atlas_grid.UNKNOWN)]
    row = np.zeros(256, bool)
    row[ids] = True
    return row, ids.tolist()


def labelmap_slices(name: str, root: Path | None, step_mm: float):
    """(rank grey, label ids) pairs of a label-map patient and its source record."""
    lv = organs_labelmaps.label_volume(name, root)
    names, mm = organs_labelmaps.ts_names(), organs_labelmaps.px_mm(lv, RENDER_SIZE)
    pairs = []
    zs = organs_labelmaps.slice_ids(lv, step_mm)
    for z in zs:
        lab = organs_data.render_lab(lv.seg, z, lv.spacing, RENDER_SIZE)
        hu = organs_synth.mean_slice(lab, names, mm, lv.complete)
        pair = atlas_slices(hu, organs_labelmaps.training_labels(lab, hu, lv.complete))
        if pair is not None:
            pairs.append(pair)
    row, ids = _known_row(lv.seg)
    source = {"name": name, **lv.source, "slices": len(zs), "step_mm": step_mm}
    return pairs, row, {**source, "atlas_slices": len(pairs), "labelled_ids": ids}


def build(
    volumes: tuple[str, ...],
    root: Path | None = None,
    exclude: tuple[str, ...] = (),
    step_mm: float = 6.0,
) -> tuple[dict, dict]:
    """(arrays for atlas.npz, atlas.json record); ``exclude``: slices kept out, as
    ``organs_train --exclude`` ("a:86-97", a validation slab); label-map patients
    (``organs_labelmaps.LABEL_MAPS``) every ``step_mm``."""
    greys, labels, known, sources = [], [], [], []
    skip = organs_data.parse_exclude(exclude)
    for name in (v for v in volumes if v in organs_labelmaps.LABEL_MAPS):
        pairs, row, source = labelmap_slices(name, root, step_mm)
        greys += [g for g, _ in pairs]
        labels += [lb for _, lb in pairs]
        known += [row] * len(pairs)
        sources.append(source)
    imaged = tuple(v for v in volumes if v not in organs_labelmaps.LABEL_MAPS)
    for vol in organs_data.training_volumes(root, imaged) if imaged else []:
        (hus, labs), (source,) = organs_data.banks([vol], RENDER_SIZE, skip)
        row, ids = _known_row(vol.seg)
        used = 0
        for hu, lab in zip(hus, labs, strict=True):
            pair = atlas_slices(hu, lab)
            if pair is None:
                continue
            greys.append(pair[0])
            labels.append(pair[1])
            known.append(row)
            used += 1
        sources.append({**source, "atlas_slices": used, "labelled_ids": ids})
    arrays = {"grey": np.stack(greys), "labels": np.stack(labels), "known": np.stack(known)}
    meta = {
        "format": "radspatial-organs-atlas",
        "format_version": 1,
        "size": atlas_grid.SIZE,
        "render_size": RENDER_SIZE,
        "window": list(WINDOW),
        "slices": len(greys),
        "anatomies": len(sources),
        "volumes": sources,
    }
    return arrays, meta


def write(out: Path, arrays: dict, meta: dict, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(out / "atlas.npz", buf.getvalue())
    meta = {**meta, "command": command, "npz_sha256": sha256_file(out / "atlas.npz")}
    atomic_write_json(out / "atlas.json", meta)


def arguments(p: argparse.ArgumentParser) -> None:
    """The builder's flags (``radspatial train atlas``, ``python -m`` this module)."""
    p.add_argument("--out", type=Path, required=True, help="atlas folder to write")
    p.add_argument(
        "--volumes",
        default="a,c",
        help="a: patient A, c: dcmqi; label maps: amos, s0327, s0328, mr (the shipped: a,c)",
    )
    p.add_argument("--step-mm", type=float, default=6.0, help="label-map slice spacing")
    p.add_argument("--data", type=Path, help="../shared/data (found by default)")
    p.add_argument(
        "--exclude", action="append", default=[], help="slices kept out, e.g. a:86-97 (repeat)"
    )


def run(a: argparse.Namespace) -> int:
    volumes = tuple(v for v in a.volumes.split(",") if v)
    arrays, meta = build(volumes, a.data, tuple(a.exclude), a.step_mm)
    command = f"python -m radspatial.training.organs_atlas --out {a.out} --volumes {a.volumes}"
    command += f" --step-mm {a.step_mm:g}"
    command += "".join(f" --exclude {e}" for e in a.exclude)
    write(a.out, arrays, meta, command)
    n = meta["anatomies"]
    print(f"{a.out}: {meta['slices']} atlas slices from {', '.join(volumes)} ({n} anatomies)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
