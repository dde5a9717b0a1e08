"""Our generated benchmark beside MIRP's published items: the distributions that set difficulty.

Reads both from MIRP's own layout (``RQ1/qa.json``, ``RQ2|RQ3/qa_<marker>.json`` and their
PNGs), so the two sides go through the same code, and prints side by side: separation of the two
centres along the asked axis, how often each structure is asked, the drawn marker areas
(measured on the PNGs by ``imaging.marker_measure``) and the yes-rate per rotation/flip variant.

    python benchmarks/compare_mirp_stats.py --generate /tmp/cmp --rules mirp     # seeds 1-6 + DICOM
    python benchmarks/compare_mirp_stats.py --data bench/ --published ../shared/data/mirp_sample

``--generate OUT`` first generates the bundled CT with seeds 1-6 and the shared DICOM patient
(512 px, RQ1-RQ3) with ``--rules`` into OUT; ``--data`` takes datasets already made.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.rules import RULE_PROFILES, QuestionRules
from radspatial.core.runtime import bundled_example
from radspatial.imaging.marker_measure import measure_box, measure_dot
from radspatial.imaging.markers import DOT_COLORS
from radspatial.imaging.volumes import Case
from radspatial.questions.frames import axis_of, worded_relation

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "data"
MARKERS = ("numbers", "letters", "dots")


def _entries(root: Path, setup: str, marker: str) -> list[dict]:
    name = "qa.json" if marker == "none" else f"qa_{marker}.json"
    path = root / setup / name
    return json.loads(path.read_text()) if path.exists() else []


def _relpos(entry: dict) -> tuple[dict, str | None]:
    qa = entry["question_answer"][0]
    return qa, None if "question_type" in qa else worded_relation(qa["question"])


def separations(root: Path) -> list[float]:
    """|centre1 - centre2| along the asked axis, every RQ1-RQ3 relative-position question."""
    out = []
    for setup, marker in [("RQ1", "none")] + [(s, m) for s in ("RQ2", "RQ3") for m in MARKERS]:
        for entry in _entries(root, setup, marker):
            qa, relation = _relpos(entry)
            if relation is None:
                continue
            ax = "xy"[axis_of(relation)]
            out.append(abs(qa[f"object1_center_{ax}"] - qa[f"object2_center_{ax}"]))
    return out


def structures(root: Path) -> Counter:
    """How often each structure is asked (RQ1: each question names two)."""
    counts: Counter = Counter()
    for entry in _entries(root, "RQ1", "none"):
        qa, relation = _relpos(entry)
        if relation is not None:
            counts.update([qa["object1_name"], qa["object2_name"]])
    return counts


def marker_areas(root: Path, limit: int = 60) -> dict[str, list[int]]:
    """Drawn marker areas (px) measured on the RQ2 PNGs: boxes w*h, dots' disc pixels."""
    out: dict[str, list[int]] = {m: [] for m in MARKERS}
    for marker in MARKERS:
        key = "label" if marker == "letters" else "gray"
        for entry in _entries(root, "RQ2", marker)[:limit]:
            qa, relation = _relpos(entry)
            if relation is None:
                continue
            png = root / "RQ2" / f"image_{marker}" / entry["filename"]
            image = np.asarray(Image.open(png).convert("RGB"))
            for k in (1, 2):
                xy = (qa[f"object{k}_center_x"], qa[f"object{k}_center_y"])
                if marker == "dots":
                    dot = measure_dot(image, xy, DOT_COLORS[qa[f"object{k}_{key}"]])
                    if dot is not None:
                        out[marker].append(dot.area)
                elif (box := measure_box(image, xy)) is not None:
                    out[marker].append(box.width * box.height)
    return out


def yes_rates(root: Path) -> dict[str, tuple[int, float]]:
    """(n, yes-rate) per rotation/flip variant over RQ1 ("?" where the files do not say)."""
    seen: dict[str, list[int]] = {}
    for entry in _entries(root, "RQ1", "none"):
        qa, relation = _relpos(entry)
        if relation is not None:
            seen.setdefault(entry.get("rotate_flip_short", "?"), []).append(int(qa["answer"]))
    return {k: (len(v), sum(v) / len(v)) for k, v in sorted(seen.items())}


def _summary(values: list[float]) -> str:
    if not values:
        return "n=0"
    v = sorted(values)
    below = sum(x < 50 for x in v)
    return (
        f"n={len(v)} min={v[0]:.1f} p5={v[int(0.05 * (len(v) - 1))]:.1f} "
        f"median={statistics.median(v):.1f} <50px={below} ({100 * below / len(v):.1f}%)"
    )


def _areas(values: list[int]) -> str:
    return f"n={len(values)} range={min(values)}-{max(values)}" if values else "n=0 measurable"


def generate_datasets(out: Path, profile: str) -> list[Path]:
    ct, seg = bundled_example()
    dicom = SHARED / "totalseg_example"
    cases = [(s, Case("ct", ct, seg)) for s in range(1, 7)]
    cases.append((1, Case("dicom", dicom / "ct_dicom", dicom / "example_seg_dicom.nii.gz")))
    roots = []
    for seed, case in cases:
        root = out / f"{profile}_{case.case_id}_seed{seed}"
        config = GenerateConfig(
            seed=seed, setups=("rq1", "rq2", "rq3"), rules=QuestionRules(profile=profile)
        )
        build_dataset([case], config, root, overwrite=True, log=lambda _: None)
        roots.append(root)
    return roots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, nargs="*", default=[], help="generated datasets")
    ap.add_argument("--published", type=Path, default=SHARED / "mirp_sample")
    ap.add_argument("--generate", type=Path, help="generate seeds 1-6 + DICOM into this folder")
    ap.add_argument("--rules", choices=RULE_PROFILES, default="mirp")
    args = ap.parse_args()
    ours = list(args.data)
    if args.generate:
        ours += generate_datasets(args.generate, args.rules)
    seps = [s for r in ours for s in separations(r)]
    counts = sum((structures(r) for r in ours), Counter())
    areas = {m: [a for r in ours for a in marker_areas(r)[m]] for m in MARKERS}
    pub_areas = marker_areas(args.published)
    print(f"{'':28} {'ours (' + args.rules + ')':>48}   published")
    print(
        f"{'separation along asked axis':28} {_summary(seps):>48}   "
        f"{_summary(separations(args.published))}"
    )
    for m in MARKERS:
        print(f"{'marker area ' + m:28} {_areas(areas[m]):>48}   {_areas(pub_areas[m])}")
    total = sum(counts.values()) or 1
    pub = structures(args.published)
    print("structure frequency (share of RQ1 mentions):")
    for name, n in counts.most_common(12):
        print(f"  {name:26} {100 * n / total:5.1f}%   published {pub.get(name, 0)}")
    print(f"  aorta asked: ours {counts.get('aorta', 0)}, published {pub.get('aorta', 0)}")
    print("yes-rate per variant (RQ1):")
    pub_rates = yes_rates(args.published)
    rates: dict[str, list[int]] = {}
    for r in ours:
        for k, (n, y) in yes_rates(r).items():
            rates.setdefault(k, []).extend([n, round(n * y)])
    for k, v in sorted(rates.items()):
        n, yes = sum(v[0::2]), sum(v[1::2])
        print(f"  {k}: n={n} yes={100 * yes / n:.1f}%")
    for k, (n, y) in pub_rates.items():
        print(f"  published {k}: n={n} yes={100 * y:.1f}%")


if __name__ == "__main__":
    main()
