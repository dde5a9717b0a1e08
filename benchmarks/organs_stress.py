"""Plain ``agent`` on RQ1 items off patient B's standard setting: other windows, sizes, anatomies.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/organs_stress.py --out /tmp/stress
    .venv/bin/python benchmarks/organs_stress.py --out /tmp/stress --per-set 40 --json r.json

Held out from the shipped weights and atlas (which trained on patients A and C only,
``src/radspatial/data/organs/config.json``):

- ``B``: patient B (``totalseg_example/ct_dicom``, contrast-enhanced) at several display
  windows and image sizes, RQ1 items made by the project's generator (each item in one of the
  8 views, as ``generate`` draws them);
- ``amos``, ``s0327``, ``s0328``: the label-map patients (AMOS, TotalSegmentator dataset), whose
  CT images we do not have, drawn as CT volumes by ``training.organs_synth`` (one set of
  parameters per volume, as one scan has one contrast phase), written as NIfTI, then generated
  like any user's CT. Their grey values are synthetic: these sets test anatomy, field of view
  and view handling, not real texture.

Every item's trace is kept: the answer, the abstention reason (numbers stripped to a
category), and the set / window / size / view / pair, tabulated with Wilson 95 % CIs.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")

# (tag, (width, level)): soft tissue, MIRP-like, CTA-like bright vessels, bone
WINDOWS = {
    "W400L40": (400, 40),
    "W350L50": (350, 50),
    "W600L150": (600, 150),
    "W1500L300": (1500, 300),
}


def synth_volume(name: str, out: Path, seed: int, step_mm: float = 10.0) -> tuple[Path, Path]:
    """A CT-like NIfTI drawn from label-map patient ``name`` (slices ``step_mm`` apart) and its
    label map (grouped TotalSegmentator ids), both canonical RAS+."""
    import nibabel as nib

    from radspatial.core.runtime import keyed_rng
    from radspatial.training import organs_data, organs_labelmaps, organs_synth

    ct_path, seg_path = out / f"{name}_s{seed}_ct.nii.gz", out / f"{name}_s{seed}_seg.nii.gz"
    if ct_path.is_file() and seg_path.is_file():
        return ct_path, seg_path
    lvol = organs_labelmaps.label_volume(name)
    names = organs_labelmaps.ts_names()
    zs = organs_labelmaps.slice_ids(lvol, step_mm)
    seg = lvol.seg[:, :, zs].copy()
    seg[seg == organs_data.IGNORE] = 0
    classes = tuple(organs_synth.intensity_class(names[i]) for i in np.unique(seg) if i in names)
    p = organs_synth.draw_params(keyed_rng(seed, f"stress-{name}"), classes, lvol.complete)
    p = replace(p, fov=2.0)  # the whole body in view
    ct = np.zeros(seg.shape, np.float32)
    for k in range(seg.shape[2]):
        # the label slice as stored (x, y); apply() works on any 2D grid of mm / px
        ct[:, :, k] = organs_synth.apply(seg[:, :, k], names, lvol.spacing[0], p)
    aff = np.diag([lvol.spacing[0], lvol.spacing[1], step_mm, 1.0])
    out.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(ct.astype(np.int16), aff), ct_path)
    nib.save(nib.Nifti1Image(seg.astype(np.int16), aff), seg_path)
    (out / f"{name}_s{seed}_params.json").write_text(json.dumps({"enhancement": p.enhancement}))
    return ct_path, seg_path


PELVIS = ("pelvic001", "pelvic004")
SETS = ("B", "amos", "s0327", "s0328")  # the default sets; --sets adds PELVIS and chest


def build(
    out: Path,
    seed: int,
    sizes: tuple[int, ...],
    windows: tuple[str, ...],
    volume_seed: int = 0,
    only: tuple[str, ...] = SETS,
) -> list[dict]:
    """Generate every set with generator seed ``seed`` (cached in ``out``; the synthetic
    volumes drawn with ``volume_seed``); returns [{set, window, size, path}]."""
    from radspatial.bench.config import GenerateConfig
    from radspatial.bench.dataset import build_dataset
    from radspatial.imaging.volumes import Case

    ts = SHARED / "totalseg_example"
    cases = {"B": Case("B", ts / "ct_dicom", ts / "example_seg_dicom.nii.gz")}
    for name in ("amos", "s0327", "s0328") + tuple(n for n in PELVIS if n in only):
        ct, seg = synth_volume(name, out / "volumes", volume_seed)
        cases[name] = Case(name, ct, seg, "totalsegmentator")
    if "chest" in only:  # a real chest CT (RTSTRUCT), never trained on (issue #47)
        thorax = SHARED / "gstt_thorax"
        rt = thorax / "rtstruct" / "rt-struct-test-data-81-100.dcm"
        cases["chest"] = Case("chest", thorax / "ct_dicom", rt, "totalsegmentator")
    if "a" in only:  # patient A's real pelvis to T11: a TRAINING patient of both models, the
        # one real pelvis here; it shows what the rules allow on real texture, not a held-out
        # figure (session 18)
        cases["a"] = Case(
            "a", ts / "example_ct.nii.gz", ts / "example_seg_fast_force_split.nii.gz",
            "totalsegmentator",
        )  # fmt: skip
    cases = {k: v for k, v in cases.items() if k in only}
    sets = []
    for cname, case in cases.items():
        for wtag in windows if cname == "B" else ("W400L40",):
            for size in sizes:
                path = out / f"{cname}_{wtag}_{size}_s{seed}"
                cfg = GenerateConfig(
                    setups=("rq1",), size=size, as_count=0, seed=seed, window=WINDOWS[wtag]
                )
                if not (path / "manifest.jsonl").is_file():
                    build_dataset([case], cfg, path, overwrite=True)
                sets.append({"set": cname, "window": wtag, "size": size, "path": path})
    return sets


def reason_class(text: str) -> str:
    """An abstention reason with numbers and names stripped: a category to count."""
    r = text.removeprefix("abstain: ")
    r = re.sub(r"\([^)]*\)", "", r)
    r = re.sub(r"[-+]?\d+(\.\d+)?", "#", r)
    r = re.sub(r"^(subject|reference)( \([^)]*\))?", r"\1", r)
    return re.sub(r"\s+", " ", r).strip()[:70]


def agents() -> dict:
    """Plain ``agent`` before round 3 (no view rule), with the view confirmation (round 3's
    first candidate, not shipped), with the sides rule (its second), as shipped after round 4
    (no match floor), with the atlas match floor (round 5's second candidate, since shipped),
    as shipped now (the defaults) and with the margin in px of every image as given (before
    round 6's margin at a 512 px reference)."""
    from radspatial.agent.localizers.organs.organs_atlas import AtlasRules
    from radspatial.agent.pipeline.agent import Agent

    out = {}
    before = {"min_match": 0.0}  # the rounds before 5 had no match floor
    for tag, rules in (
        ("current", AtlasRules(confirm_view=False, need_sides=False, mirror_sides=False, **before)),
        (
            "confirm_view",
            AtlasRules(confirm_view=True, need_sides=False, mirror_sides=False, **before),
        ),
        (
            "need_sides",
            AtlasRules(confirm_view=False, need_sides=True, mirror_sides=False, **before),
        ),
        ("round4", AtlasRules(**before)),  # shipped after round 4
        ("match_floor", AtlasRules(min_match=0.95)),  # round 5's second candidate
        ("shipped", AtlasRules()),  # the defaults
        ("no_votes", AtlasRules(landmark_votes=False)),  # before the table's landmarks voted
        ("no_reflect", AtlasRules(reflect_missing=False)),  # before counterparts reflected
        ("any_votes", AtlasRules(votes_consensus=False)),  # votes before #47 round 2
        ("no_pairs", AtlasRules(pair_sides_open=False)),  # open pairs before #47 round 2
        ("no_side_check", AtlasRules(side_consistent=False)),  # before #47 round 3
        ("any_right", AtlasRules(right_skew=1.0)),  # before #47 round 3
        ("atlas_mirror", AtlasRules(mirror_needs_image=False)),  # before #47 round 4
        ("own_side_atlas", AtlasRules(atlas_either_side=False)),  # before session 18
        ("spine_midline", AtlasRules(midline_from_outline=False)),  # before session 18
        ("no_single", AtlasRules(pair_single=False)),  # before session 18's third rule
        # both of session 18's rules off: the defaults before it
        ("before18", AtlasRules(atlas_either_side=False, midline_from_outline=False)),
    ):
        out[tag] = Agent("auto", second=False)  # the first model alone, with these rules
        out[tag].localizer.organs.atlas_rules = rules
    out["fixed_margin"] = Agent("auto", second=False, margin_reference=None)
    # the shipped first model with the shipped second (opt-in since #47 round 8; the default
    # of rounds 6-8), and that cascade with a rule off (the arm of a rule it runs)
    out["default"] = Agent("auto", second=True)
    out["pairs_one_side"] = with_rules(Agent("auto", second=True), pair_across=False)  # r6
    out["no_agree"] = Agent("auto", second=True, agree_tolerance=None)  # before #47 r8
    # 4 test-time copies (their half turns too) instead of 2, in every model (#47 round 9)
    out["first4"] = with_copies(Agent("auto", second=False), 4)
    out["copies2"] = with_copies(Agent("auto", second=False), 2)  # the default before r9
    out["cascade"] = with_copies(Agent("auto", second=True), 2)  # as in round 9's run
    out["cascade4"] = with_copies(Agent("auto", second=True), 4)
    # the first on 4 copies, the second on 2 (less CPU where the second runs; session 18)
    out["cascade42"] = with_copies(Agent("auto", second=True), 4, second=2)  # the opt-in since r10
    out["cascade41"] = with_copies(Agent("auto", second=True), 4, second=1)  # session 18, dev
    out["cascade42_no_single"] = with_rules(
        with_copies(Agent("auto", second=True), 4, second=2), pair_single=False
    )
    return out


def sample(sets: list[dict], per_set: int, seed: int):
    """(set, item) pairs: ``per_set`` items of each set, drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    for s in sets:
        lines = (s["path"] / "manifest.jsonl").read_text().splitlines()
        items = [json.loads(x) for x in lines]
        if len(items) > per_set:
            items = [items[i] for i in sorted(rng.choice(len(items), per_set, replace=False))]
        for it in items:
            yield s, it


def lopo_agents(root: Path) -> dict:
    """Per label-map patient, plain ``agent`` with the shipped weights and an atlas of every
    other anatomy (``root/no_<name>``: weights + ``train atlas --volumes`` without it)."""
    from radspatial.agent.pipeline.agent import Agent

    return {n: Agent("auto", model_dir=root / f"no_{n}") for n in ("amos", "s0327", "s0328")}


def folder_agents(dirs: list[Path], tags: list[str], mirror: bool = False) -> dict:
    """Plain ``agent`` (shipped rules) with each model folder: other weights, same checks;
    with ``mirror`` also each with ``AtlasRules.mirror_sides`` on (tag + "+mirror")."""
    from radspatial.agent.pipeline.agent import Agent

    if len(tags) != len(dirs):
        raise SystemExit(f"--tag: {len(tags)} given for {len(dirs)} --model-dir")
    out = {}
    for d, t in zip(dirs, tags, strict=True):
        out[t] = Agent("auto", model_dir=d)
        if mirror:  # the pair: off (round 3's rules) and on (the default since round 4)
            out[t] = with_rules(out[t], mirror_sides=False)
            out[f"{t}+mirror"] = with_rules(Agent("auto", model_dir=d), mirror_sides=True)
    return out


def second_agents(dirs: list[Path], tags: list[str]) -> dict:
    """Plain ``agent`` (the shipped first model and rules) asking each folder of ``dirs`` as
    its second model where the first's localization is not trusted (issue #47 round 6)."""
    from radspatial.agent.pipeline.agent import Agent

    if len(tags) != len(dirs):
        raise SystemExit(f"--second-tag: {len(tags)} given for {len(dirs)} --second-dir")
    return {t: Agent("auto", second=d) for d, t in zip(dirs, tags, strict=True)}


def with_copies(agent, variants: int, second: int | None = None):
    """``agent`` with its organs checks on ``variants`` test-time copies (``organs_checks.
    with_copies``), in its second model too when it has one (on ``second`` copies if given)."""
    from radspatial.agent.localizers.organs import organs_checks

    for k, organs in enumerate(_organs_of(agent)):
        n = variants if k == 0 or second is None else second
        organs.checks = organs_checks.with_copies(n)
    return agent


def with_rules(agent, **change):
    """``agent`` with its atlas rules changed (``AtlasRules`` fields), in its second model
    too when it has one."""
    for organs in _organs_of(agent):
        organs.atlas_rules = replace(organs.atlas_rules, **change)
    return agent


def _organs_of(agent):
    """The organs localizer of ``agent``'s ``auto`` and of its second model, if any."""
    auto = agent.localizer
    while auto is not None:
        yield auto.organs
        auto = getattr(auto, "second_opinion", None)


PELVIC_BONES = ("femur_left", "femur_right", "hip_left", "hip_right")


def pelvic_slices(path: Path) -> set[str]:
    """The set's slice images whose labels hold a femur or a hip bone (the pelvis level; the
    generator's per-slice structure list, MIRP's centres file)."""
    name = "center_of_anatomical_stuctures_in_standard_radiological_orientation.json"
    entries = json.loads((path / name).read_text())
    return {
        e["filename"]
        for e in entries
        if any(x["class_name"] in PELVIC_BONES for x in e.get("label_info", []))
    }


def run(named: dict, sets: list[dict], per_set: int, seed: int) -> list[dict]:
    """Every sampled item through every agent of ``named`` (interleaved, same process); a
    value that is a dict maps set names to agents (sets it lacks are skipped)."""
    rows = []
    pelvic = {str(s["path"]): pelvic_slices(s["path"]) for s in sets}
    for s, it in sample(sets, per_set, seed):
        image = np.asarray(Image.open(s["path"] / it["image"]).convert("RGB"))
        pair = "/".join(sorted(it[k]["name"] for k in ("object1", "object2")))
        for tag, agent in named.items():
            if isinstance(agent, dict):
                if s["set"] not in agent:
                    continue
                agent = agent[s["set"]]
            t0 = time.process_time()
            res = agent.answer(image, it["question"])
            cpu = time.process_time() - t0
            rows.append(
                {
                    "agent": tag,
                    "set": s["set"],
                    "window": s["window"],
                    "size": s["size"],
                    "view": it["transform"],
                    "pair": pair,
                    "id": it["id"],
                    "truth": it["answer"],
                    "decidable": it.get("decidable"),  # the image decides it (issue #46)
                    "decidable_reason": (it.get("decidable_reason") or "").split(":")[0],
                    "pelvic": Path(it["image"]).name in pelvic[str(s["path"])],
                    "answer": res.answer,
                    "reason": None if res.answer is not None else reason_class(res.text),
                    "reply": res.text,
                    "cpu_s": round(cpu, 4),
                }  # fmt: skip
            )
    return rows


def cpu_ratio(named: dict, sets: list[dict], repeats: int) -> str:
    """Median CPU ms per 512 px patient-B slice of each agent, interleaved, and the ratio to
    the first."""
    items = [(s, it) for s, it in sample(sets, 10, 0) if s["set"] == "B" and s["size"] == 512]
    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeats):
        for s, it in items[:10]:
            image = np.asarray(Image.open(s["path"] / it["image"]).convert("RGB"))
            for tag, agent in named.items():
                if isinstance(agent, dict):
                    continue
                t0 = time.process_time()
                agent.answer(image, it["question"])
                times[tag].append(1000 * (time.process_time() - t0))
    med = {t: float(np.median(v)) for t, v in times.items()}
    ref = med[next(iter(med))]
    return "\n".join(
        f"{t}: median {m:.1f} ms CPU per 512 px slice (n={len(times[t])}), ratio {m / ref:.3f}"
        for t, m in med.items()
    )


def table(rows: list[dict], key: str) -> list[str]:
    from radspatial.core.stats import wilson_interval

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r[key]) if key != "all" else "all"].append(r)
    out = [f"| {key} | n | answered [CI] | right / answered [CI] | wrong |", "|---" * 5 + "|"]
    for k, rs in sorted(groups.items()):
        n, ans = len(rs), sum(r["answer"] is not None for r in rs)
        right = sum(r["answer"] == r["truth"] for r in rs)
        lo, hi = wilson_interval(ans, n)
        alo, ahi = wilson_interval(right, ans) if ans else (0.0, 1.0)
        out.append(
            f"| {k} | {n} | {ans} ({100 * ans / n:.0f} % [{100 * lo:.0f}-{100 * hi:.0f}]) "
            f"| {right}/{ans} [{100 * alo:.0f}-{100 * ahi:.0f}] | {ans - right} |"
        )
    return out


def report(rows: list[dict], keys=("all", "set", "window", "size", "view", "pair")) -> str:
    lines = []
    for key in keys:
        lines += table(rows, key) + [""]
    reasons = Counter(r["reason"] for r in rows if r["reason"])
    lines.append("abstention reasons:")
    lines += [f"  {n:4d}  {r}" for r, n in reasons.most_common(15)]
    wrong = [r for r in rows if r["answer"] is not None and r["answer"] != r["truth"]]
    lines.append(f"wrong answers: {len(wrong)}")
    lines += [f"  {w['set']} {w['window']} {w['size']} {w['view']} {w['id']}" for w in wrong]
    rows512 = [r for r in rows if r["size"] == 512]
    cpu = sorted(r["cpu_s"] for r in rows512)
    if cpu:
        med = 1000 * cpu[len(cpu) // 2]
        lines.append(f"CPU per 512 px item, median {med:.1f} ms (n={len(cpu)})")
        per_set = {
            name: 1000 * float(np.median([r["cpu_s"] for r in rows512 if r["set"] == name]))
            for name in dict.fromkeys(r["set"] for r in rows512)
        }
        lines.append("  per set: " + ", ".join(f"{k} {v:.1f}" for k, v in per_set.items()))
    return "\n".join(lines + targets(rows))


HELD_OUT = ("B", "amos", "s0327", "s0328", "pelvic004")  # no model trained on these
SIDE_FREE = ("mirror-invariant", "no sided structure")  # the answer does not need the sides


def targets(rows: list[dict]) -> list[str]:
    """Issue #47's two coverage targets: the plain-slice chest/abdomen sets held out (B, amos,
    s0327, s0328, every item, as rounds 1-9 counted them), and pelvis-level items whose answer
    does not depend on the sides, held out (pelvic004, the label-map patients' pelvic slices)
    and seen (patient A's real pelvis, Pelvic-Ref-001) apart."""
    from radspatial.core.stats import wilson_interval

    def line(label: str, chosen: list[dict]) -> str:
        n, k = len(chosen), sum(r["answer"] is not None for r in chosen)
        wrong = sum(r["answer"] is not None and r["answer"] != r["truth"] for r in chosen)
        if not n:
            return f"{label}: no items"
        lo, hi = wilson_interval(k, n)
        share = f"{100 * k / n:.0f} % [{100 * lo:.0f}-{100 * hi:.0f}]"
        return f"{label}: {k} / {n} ({share}), wrong {wrong}"

    held = [r for r in rows if r["set"] in HELD_OUT]
    pelvic = [r for r in held if r.get("pelvic") or r["set"] == "pelvic004"]
    seen = [r for r in rows if r["set"] in ("a", "pelvic001") and r.get("pelvic")]
    free = [r for r in pelvic if r["decidable_reason"] in SIDE_FREE]
    return [
        line("target: chest/abdomen sets, held out", [r for r in held if r["set"] != "pelvic004"]),
        line("target: pelvis, side-free, held out", free),
        line(
            "  pelvis, side-free, seen (A real, Pelvic-Ref-001)",
            [r for r in seen if r["decidable_reason"] in SIDE_FREE],
        ),
        line("  pelvis, side-dependent, held out", [r for r in pelvic if r not in free]),
    ]


def figure(rows: list[dict], out: Path, agents: list[str] | None = None) -> None:
    """Coverage (bars) and wrong answers per set, one bar per agent, Wilson 95 % CIs; the
    label-map sets' grey is synthetic (their panel says so)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from radspatial.core.stats import wilson_interval

    agents = agents or list(dict.fromkeys(r["agent"] for r in rows))
    sets = list(dict.fromkeys(r["set"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.0, len(sets) * (1.4 + 0.3 * len(agents))), 3.8))
    width = 0.8 / len(agents)
    for j, tag in enumerate(agents):
        xs, cov, err, wrong = [], [], [[], []], []
        for i, name in enumerate(sets):
            rs = [r for r in rows if r["agent"] == tag and r["set"] == name]
            if not rs:
                continue
            ans = sum(r["answer"] is not None for r in rs)
            lo, hi = wilson_interval(ans, len(rs))
            c = ans / len(rs)
            xs.append(i + (j - (len(agents) - 1) / 2) * width)
            cov.append(100 * c)
            err[0].append(100 * (c - lo))
            err[1].append(100 * (hi - c))
            wrong.append(sum(r["answer"] is not None and r["answer"] != r["truth"] for r in rs))
        bars = ax.bar(xs, cov, width, yerr=err, capsize=2, label=tag)
        for b, w in zip(bars, wrong, strict=True):
            if w:
                ax.text(b.get_x() + b.get_width() / 2, 2, f"{w}x", ha="center", fontsize=6,
                        color="white", rotation=90)  # fmt: skip
    ax.set_xticks(range(len(sets)))
    ax.set_xticklabels([s if s == "B" else f"{s}\n(synthetic grey)" for s in sets], fontsize=8)
    ax.set_ylabel("coverage % (answered / asked)")
    ax.set_ylim(0, 100)
    ax.set_title("plain agent, RQ1 (white: wrong answers)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/organs_stress"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-set", type=int, default=30, help="items sampled per set")
    p.add_argument("--sizes", default="512,256")
    p.add_argument("--windows", default=",".join(WINDOWS))
    p.add_argument("--json", type=Path, help="write every item's row here")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--time", type=int, metavar="REPEATS", help="only CPU time, REPEATS rounds")
    p.add_argument("--pairs", action="store_true", help="also tabulate by structure pair")
    p.add_argument("--lopo", type=Path, help="folder of no_<patient> model folders (atlas LOPO)")
    p.add_argument(
        "--agents",
        default="current,need_sides",
        help="of current,confirm_view,need_sides,round4,match_floor,shipped,no_votes,"
        "no_reflect,any_votes,no_pairs,no_side_check,any_right,atlas_mirror,fixed_margin,"
        "default,pairs_one_side,no_agree,first4,copies2,cascade,cascade4,cascade42,own_side_atlas,spine_midline,before18,no_single,cascade42_no_single,cascade41",
    )
    p.add_argument("--sets", default=",".join(SETS), help=f"of {','.join(SETS + PELVIS)},chest,a")
    p.add_argument(
        "--model-dir",
        type=Path,
        action="append",
        default=[],
        help="also plain agent with this model folder (weights + atlas); repeatable",
    )
    p.add_argument("--tag", action="append", default=[], help="one name per --model-dir")
    p.add_argument(
        "--second-dir",
        type=Path,
        action="append",
        default=[],
        help="also plain agent asking this model folder where the first abstains; repeatable",
    )
    p.add_argument("--second-tag", action="append", default=[], help="one per --second-dir")
    p.add_argument("--mirror", action="store_true", help="mirror_sides off and on")
    p.add_argument("--figure", type=Path, help="with --from-json: the coverage figure (png)")
    p.add_argument("--from-json", type=Path, help="tabulate / plot rows written by --json")
    a = p.parse_args()
    if a.from_json:
        rows = json.loads(a.from_json.read_text())
        if a.figure:
            figure(rows, a.figure)
        for tag in dict.fromkeys(r["agent"] for r in rows):
            print(f"## {tag}")
            print(report([r for r in rows if r["agent"] == tag], ("all", "set")))
        return
    import torch

    torch.set_num_threads(a.threads)
    sizes = tuple(int(s) for s in a.sizes.split(","))
    only = tuple(a.sets.split(","))
    sets = build(a.out, a.seed, sizes, tuple(a.windows.split(",")), only=only)
    named = {k: v for k, v in agents().items() if k in a.agents.split(",")}
    if a.lopo:
        named["lopo_atlas"] = lopo_agents(a.lopo)
    if a.mirror and "need_sides" in named:
        named["need_sides+mirror"] = with_rules(agents()["need_sides"], mirror_sides=True)
    named.update(folder_agents(a.model_dir, a.tag, a.mirror))
    named.update(second_agents(a.second_dir, a.second_tag))
    if a.time:
        print(cpu_ratio(named, sets, a.time))
        return
    rows = run(named, sets, a.per_set, a.seed)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    keys = ("all", "set", "window", "size", "view", "decidable_reason")
    keys += ("pair",) if a.pairs else ()
    for tag in named:
        print(f"## {tag}")
        print(report([r for r in rows if r["agent"] == tag], keys))


if __name__ == "__main__":
    main()
