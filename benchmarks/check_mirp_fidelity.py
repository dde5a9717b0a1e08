"""MIRP fidelity check: markers agree with answers, and the anatomy prior in MIRP's frame.

For seeds 0-9 on the bundled real CT and on small phantoms (normal; situs inversus, where
typical anatomy is wrong, so the prior must fail in the anatomical frame too), generate
the relative-position benchmark and count marked questions (RQ2/RQ3) whose drawn markers
contradict the answer or lie closer than the margin along the asked axis (in the shown frame;
also in standard view where the manifest records it). Then evaluate ``baseline:anatomy-prior``
and report MIRP's anatomical left/right accuracy (the ``mirp`` block, which MIRP's own script
reproduces exactly: tests/test_mirp.py) and the image-frame accuracy; and the marker agent's
abstentions on RQ3.

    python benchmarks/check_mirp_fidelity.py --out /tmp/fidelity [--seeds 0-9]

Runs with whatever radspatial is importable, so the same script measures an older checkout
(``PYTHONPATH=old/src``) for a before/after comparison.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.imaging.volumes import Case, read_cases_csv

DATA = Path(__file__).resolve().parents[1] / "src" / "radspatial" / "data"
MARGIN = 10.0


def _violations(rows: list[dict]) -> tuple[int, int]:
    """(marked questions checked, questions whose markers contradict or blur the answer)."""
    checked = bad = 0
    for r in rows:
        if r["setup"] not in ("rq2", "rq3") or r.get("question_type") != "relative_position":
            continue
        axis = 0 if r["relation"] in ("left_of", "right_of") else 1
        checked += 1
        frames = [("marker_xy", r["answer"])]
        std = r.get("answer_standard", r.get("answer_canonical"))
        if "marker_xy_canonical" in r["object1"]:
            frames.append(("marker_xy_canonical", std))
        for key, answer in frames:
            a, b = r["object1"][key], r["object2"][key]
            smaller = a[axis] < b[axis]
            says = smaller if r["relation"] in ("left_of", "above") else not smaller
            if abs(a[axis] - b[axis]) < MARGIN or int(says) != answer:
                bad += 1
                break
    return checked, bad


def _old_anatomy(run: Path) -> dict:
    """Older runs have no ``mirp`` block: MIRP's anatomical truth for left/right questions is
    the standard-view answer swapped (the patient's left is the image right)."""
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    lr = [r for r in rows if r["relation"] in ("left_of", "right_of")]
    lr = [r for r in lr if r.get("expected_canonical") is not None]
    if not lr:
        return {}
    right = sum(int(r["parsed"] == 1 - r["expected_canonical"]) for r in lr)
    return {"accuracy_mean": right / len(lr), "n_items": len(lr)}


def _eval(data: Path, out: Path, model: str, setups: tuple[str, ...]) -> dict:
    from radspatial.eval.runner import EvalConfig, run_eval

    run_eval(data, out, EvalConfig(model=model, runs=1, setups=setups), progress=False)
    return json.loads((out / "metrics.json").read_text())


def _cases(tmp: Path) -> dict[str, list[Case]]:
    from radspatial.phantoms import write_phantoms

    ct, seg = DATA / "example_ct_sm.nii.gz", DATA / "example_seg.nii.gz"
    csv = write_phantoms(
        tmp / "phantoms",
        n=2,
        seed=0,
        shape=(256, 256, 60),
        variant=["normal", "situs_inversus"],
        progress=False,
    )
    phantoms = read_cases_csv(csv)
    return {
        "bundled CT": [Case("example", ct, seg)],
        "phantom normal": [c for c in phantoms if c.variant == "normal"],
        "phantom situs_inversus": [c for c in phantoms if c.variant == "situs_inversus"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seeds", default="0-9")
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    tmp = args.out or Path(tempfile.mkdtemp())
    tmp.mkdir(parents=True, exist_ok=True)
    results = []
    for source, cases in _cases(tmp).items():
        for seed in seeds:
            t0 = time.perf_counter()
            out = tmp / f"{source.replace(' ', '_')}_s{seed}"
            config = GenerateConfig(seed=seed, setups=("rq1", "rq2", "rq3"))
            build_dataset(cases, config, out, overwrite=True, log=lambda _: None)
            rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
            checked, bad = _violations(rows)
            prior = _eval(out, tmp / f"prior_{out.name}", "baseline:anatomy-prior", ("rq1",))
            mirp = prior.get("mirp", {}).get("RQ1/none", {})
            anat = mirp.get("anatomy_left_right") or _old_anatomy(tmp / f"prior_{out.name}")
            agent = _eval(out, tmp / f"agent_{out.name}", "agent:markers", ("rq3",))
            result = {
                "source": source,
                "seed": seed,
                "marked_questions": checked,
                "marker_violations": bad,
                "prior_image_rq1": prior["overall"]["accuracy_mean"],
                "prior_mirp_anatomy_lr": anat.get("accuracy_mean"),
                "prior_mirp_anatomy_n": anat.get("n_items"),
                "agent_rq3_invalid": agent["overall"]["invalid_rate"],
                "agent_rq3_accuracy": agent["overall"]["accuracy_mean"],
                "seconds": round(time.perf_counter() - t0, 1),
            }
            results.append(result)
            print(json.dumps(result))
    bad = sum(r["marker_violations"] for r in results)
    total = sum(r["marked_questions"] for r in results)
    print(f"marked questions whose markers contradict or blur the answer: {bad} of {total}")
    for source in dict.fromkeys(r["source"] for r in results):
        anat = [
            r["prior_mirp_anatomy_lr"]
            for r in results
            if r["source"] == source and r["prior_mirp_anatomy_lr"] is not None
        ]
        img = [r["prior_image_rq1"] for r in results if r["source"] == source]
        if anat:
            print(
                f"{source}: anatomy prior, MIRP anatomical L/R min {min(anat):.3f}, mean "
                f"{sum(anat) / len(anat):.3f}; image frame RQ1 mean {sum(img) / len(img):.3f}"
            )
    worst = max(r["agent_rq3_invalid"] for r in results)
    print(f"marker agent RQ3 invalid (abstain) rate, max over runs: {worst:.3f}")


if __name__ == "__main__":
    main()
