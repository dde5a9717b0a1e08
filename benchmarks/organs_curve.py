"""The ``organs`` network's learning curve: held-out coverage and accuracy vs training anatomies.

    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python benchmarks/organs_curve.py train \\
        --config S5 --seed 0 --out runs/curve --steps 200   # one cell's network
    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python benchmarks/organs_curve.py eval \\
        --run runs/curve/S5_s0 --cache /tmp/bench_organs     # its held-out numbers (json)
    .venv/bin/python benchmarks/organs_curve.py table --runs runs/curve  # the markdown table

Every cell trains a network **from scratch** (no warm start: the shipped weights saw patients
A and C, which would leak into every row), with the shipped recipe's augmentation at a reduced
size (``--size``, ``--channels``, ``--steps``: what the shared CPU allows; the table says so).
:data:`CONFIGS` names the training anatomies: real CT slices (``a``: patient A, ``c``:
patient C) and slices synthesised from label maps (``organs_synth``; ``a`` draws patient A's
own labels anew, ``amos``, ``s0327``, ``s0328``, ``mr``). Synthesised banks are drawn once per
(patient, seed, size, spacing) and cached as npz under ``--cache-dir``.

``eval``: the network alone (``organs``, the shipped 4-copy checks) on patient B's RQ1 items
(``bench_organs``: seeds 0-4, n = 100) and the 3 MIRP RQ1 images, and on the patients a cell
did not train on: patient C (``bench_organs_relations --set patient-c``: 3 slices x 6 windows
x 8 views) and, for cells without patient A, A's slab z = 88-95. Wilson 95 % CIs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

# name -> (real CT volumes, label maps drawn into synthetic CT)
CONFIGS = {
    "R1": (("a",), ()),
    "R2": (("a", "c"), ()),
    "S1": (("a",), ("a",)),
    "S2": (("a",), ("a", "amos")),
    "S3": (("a",), ("a", "amos", "s0327")),
    "S5": (("a",), ("a", "amos", "s0327", "s0328", "mr")),
    "S6": (("a", "c"), ("a", "amos", "s0327", "s0328", "mr")),
    "N5": (("c",), ("amos", "s0327", "s0328", "mr")),
}


def anatomies(name: str) -> list[str]:
    real, synth = CONFIGS[name]
    return sorted(set(real) | set(synth))


def _synth_cached(name: str, vols: list, config, cache: Path):
    """One patient's synthesised bank and record, drawn once per key and kept as npz."""
    from radspatial.training import organs_labelmaps as olm

    key = f"{name}_s{config.seed}_{config.size}px_{config.synth_step_mm:g}mm_d{config.synth_draws}"
    path = cache / f"{key}.npz"
    if path.is_file():
        with np.load(path, allow_pickle=False) as z:
            return (z["hu"], z["lab"]), json.loads(str(z["record"]))
    if name in olm.LABEL_MAPS:
        lv = olm.label_volume(name)
    else:
        from radspatial.training import organs_data

        tv = next(v for v in vols if v.name == f"patient_{name}") if vols else None
        if tv is None:
            tv = organs_data.training_volumes(None, (name,))[0]
        lv = olm.LabelVolume(tv.name, tv.seg, tv.spacing, True, dict(tv.source))
    bank, record = olm.synth_bank(
        lv, config.size, config.synth_step_mm, config.synth_draws, config.seed
    )
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, hu=bank[0], lab=bank[1], record=json.dumps(record))
    tmp.replace(path)
    return bank, record


def build(config, cache: Path):
    """``organs_train.build_banks``'s result for ``config`` (no phantoms), synthesised banks
    from the cache."""
    from radspatial.training import organs_data

    vols = organs_data.training_volumes(None, config.volumes)
    real, sources = organs_data.banks(vols, config.size)
    parts = [_synth_cached(n, vols, config, cache) for n in config.synth]
    size = config.size
    if parts:
        drawn = (np.concatenate([p[0][0] for p in parts]), np.concatenate([p[0][1] for p in parts]))
    else:
        drawn = (np.zeros((0, size, size), np.float16), np.zeros((0, size, size), np.uint16))
    real_source = {"volumes": sources, "slices": int(len(real[0]))}
    real_source["synthesised"] = [p[1] for p in parts]
    real_source["plausibility"] = organs_data.plausibility_of(real, drawn)
    phantoms = (np.zeros((0, size, size), np.float16), np.zeros((0, size, size), np.uint8))
    return phantoms, real, drawn, real_source


def train(a: argparse.Namespace) -> None:
    from radspatial.training.organs_train import OrgansConfig, train_organs

    real, synth = CONFIGS[a.config]
    config = OrgansConfig(
        n_phantoms=0,
        real_weight=0.5 if synth else 1.0,
        synth=synth,
        synth_weight=0.5 if synth else 0.0,
        synth_draws=1,
        synth_step_mm=a.step_mm,
        volumes=real,
        steps=a.steps,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        size=a.size,
        channels=tuple(int(c) for c in a.channels.split(",")),
        threads=1,
        init_from=str(a.init_from) if a.init_from else None,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    data = build(config, a.cache_dir)
    out = a.out / f"{a.config}_s{a.seed}"
    record = train_organs(out, config, data=data)
    record["curve"] = {
        "config": a.config,
        "anatomies": anatomies(a.config),
        "real": list(real),
        "synth": list(synth),
        "cold_start": not a.init_from,
        "data_wall_s": round(time.perf_counter() - t0 - record["training"]["train_seconds"], 1),
        "total_cpu_s": round(time.process_time() - c0, 1),
        "command": "python benchmarks/organs_curve.py train "
        + f"--config {a.config} --seed {a.seed} --steps {a.steps} --size {a.size} "
        + f"--channels {a.channels} --batch-size {a.batch_size} --lr {a.lr} --step-mm {a.step_mm}"
        + (f" --init-from {a.init_from}" if a.init_from else ""),
    }
    from radspatial.core.io import atomic_write_json

    atomic_write_json(out / "config.json", record)
    steps, cpu = record["training"]["steps_done"], record["curve"]["total_cpu_s"]
    print(f"{out}: {steps} steps, {cpu} s CPU")


def _summary(report: dict) -> dict:
    keep = ("n", "answered", "correct", "coverage", "coverage_ci", "accuracy_answered")
    keep += ("accuracy_answered_ci",)
    return {k: report["summary"].get(k) for k in keep} | {"structures": report["structures"]}


def hits(loc, items, ok_px: float = 20.0) -> dict:
    """Every asked structure of ``items`` located once by the network (its centre whatever
    the checks then say): how many lie within ``ok_px`` (512 px image) of the truth."""
    import math

    from PIL import Image

    from radspatial.agent.pipeline.types import Context, Ref
    from radspatial.core.labels import normalize_name

    n = found = close = 0
    for it in items:
        image = np.asarray(Image.open(it["image"]).convert("RGB"))
        objects = [o for o in it["objects"] if o[0]]
        located = loc.locate(
            image, [Ref(name=normalize_name(name)) for name, _ in objects], Context()
        )
        for (_, truth), f in zip(objects, located, strict=True):
            n += 1
            found += f is not None
            close += f is not None and math.dist(f.xy, truth) <= ok_px
    return {"n": n, "found": found, "within_px": ok_px, "close": close}


def evaluate(a: argparse.Namespace) -> None:
    import bench_organs as bo
    import bench_organs_relations as bor
    import torch

    from radspatial.agent.localizers.organs.organs import OrgansLocalizer
    from radspatial.agent.pipeline.agent import Agent

    torch.set_num_threads(1)
    t0 = time.process_time()
    cfg = json.loads((a.run / "config.json").read_text())
    trained = set(cfg["curve"]["anatomies"])
    agent = Agent("organs", model_dir=a.run)
    pooled = []
    for seed in range(5):
        items = list(bo._items_dicom(bo.dicom_rq1(a.cache, seed)))
        pooled += [{**it, "id": f"s{seed}_{it['id']}"} for it in items]
    out = {"run": str(a.run), "anatomies": sorted(trained)}
    out["B"] = _summary(bo.evaluate(agent, pooled, None, a.run.name))
    out["MIRP"] = _summary(bo.evaluate(agent, bo._items_mirp(bo.SHARED / "mirp_sample"), None, ""))
    loc = OrgansLocalizer(a.run)
    out["B_localizations"] = hits(loc, pooled)
    if "c" not in trained:
        out["C"] = bor.run(bor._items("patient-c", a.cache), loc, 20.0)["relation"]
    if "a" not in trained and not a.no_slab:
        out["A_slab"] = bor.run(bor._items("slab", a.cache), loc, 20.0)["relation"]
    out["eval_cpu_s"] = round(time.process_time() - t0, 1)
    (a.run / "heldout.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k not in ("B", "MIRP")}))
    print("B", json.dumps({k: v for k, v in out["B"].items() if k != "structures"}))


def _cell(res: dict | None) -> str:
    if not res or not res.get("n"):
        return "-"
    n, ans = res["n"], res["answered"]
    right = res.get("correct", res.get("right", 0))
    ci = res["coverage_ci"]
    acc = res.get("accuracy_answered_ci", res.get("accuracy_ci")) if ans else None
    acc_text = f" [{100 * acc[0]:.0f}-{100 * acc[1]:.0f}]" if acc else ""
    return f"{100 * ans / n:.0f} % [{100 * ci[0]:.0f}-{100 * ci[1]:.0f}], {right}/{ans}{acc_text}"


def _found(h: dict) -> str:
    loc = h.get("B_localizations")
    return f"{loc['close']}/{loc['n']}" if loc else "-"


def rows(runs: Path) -> list[dict]:
    out = []
    for f in sorted(runs.glob("*/heldout.json")):
        h = json.loads(f.read_text())
        c = json.loads((f.parent / "config.json").read_text())
        out.append({"name": c["curve"]["config"], "seed": int(f.parent.name.rsplit("_s", 1)[1])} | {
            "h": h, "c": c, "steps": c["training"]["steps_done"],
            "cpu": c["curve"]["total_cpu_s"], "wall": c["training"]["train_seconds"],
        })  # fmt: skip
    return out


def table(a: argparse.Namespace) -> None:
    print("| cell | anatomies | seed | steps | CPU s (train wall s) "
          "| B coverage [CI], right/answered [CI] | B localizations within 20 px | MIRP "
          "| C (720 q) | A slab |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rs = rows(a.runs)
    for r in sorted(rs, key=lambda r: (list(CONFIGS).index(r["name"]), r["seed"])):
        h = r["h"]
        print(
            f"| {r['name']} | {', '.join(h['anatomies'])} ({len(h['anatomies'])}) | {r['seed']} "
            f"| {r['steps']} | {r['cpu']:.0f} ({r['wall']:.0f}) | {_cell(h['B'])} | {_found(h)} "
            f"| {h['MIRP']['answered']}/3, {h['MIRP']['correct']} right | {_cell(h.get('C'))} "
            f"| {_cell(h.get('A_slab'))} |"
        )
    if a.figure:
        figure(rs, a.figure)


def figure(rs: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for r in rs:
        real_only = not CONFIGS[r["name"]][1]
        n = len(r["h"]["anatomies"]) + (0.08 if real_only else -0.08)
        for ax, key in zip(axes, ("B", "C"), strict=True):
            res = r["h"].get(key)
            if not res or not res.get("n"):
                continue
            cov = res["answered"] / res["n"]
            lo, hi = res["coverage_ci"]
            style = "s" if real_only else "o"
            color = "tab:blue" if real_only else "tab:orange"
            if r["name"] == "N5":
                style, color = "^", "tab:green"
            ax.errorbar(n, 100 * cov, yerr=[[100 * (cov - lo)], [100 * (hi - cov)]],
                        fmt=style, color=color, capsize=3)  # fmt: skip
    for ax, title in zip(axes, ("patient B RQ1 (n = 100)", "patient C (720 q)"), strict=True):
        ax.set_xlabel("training anatomies")
        ax.set_ylabel("coverage %")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([1, 2, 3, 5, 6])
        ax.set_xlim(0.5, 6.5)
        ax.set_ylim(0, 100)
    axes[0].plot([], [], "s", color="tab:blue", label="real only")
    axes[0].plot([], [], "o", color="tab:orange", label="real + synthetic")
    if any(r["name"] == "N5" for r in rs):
        axes[0].plot([], [], "^", color="tab:green", label="no patient A")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--config", choices=sorted(CONFIGS), required=True)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--size", type=int, default=96)
    t.add_argument("--channels", default="8,16,32,64,128")
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--lr", type=float, default=0.003)
    t.add_argument("--step-mm", type=float, default=9.0)
    t.add_argument("--init-from", type=Path, help="warm start (a model folder)")
    t.add_argument("--cache-dir", type=Path, default=Path("/tmp/organs_curve_cache"))
    e = sub.add_parser("eval")
    e.add_argument("--run", type=Path, required=True)
    e.add_argument("--cache", type=Path, default=Path("/tmp/bench_organs"))
    e.add_argument("--no-slab", action="store_true", help="skip patient A's slab (slow)")
    tb = sub.add_parser("table")
    tb.add_argument("--runs", type=Path, required=True)
    tb.add_argument("--figure", type=Path)
    a = p.parse_args()
    {"train": train, "eval": evaluate, "table": table}[a.cmd](a)


if __name__ == "__main__":
    main()
