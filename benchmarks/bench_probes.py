"""Probe training speed per encoder, and the timed CPU probe suite (Table 1 end to end).

``speed`` (default): images/s of one training step (forward + backward + AdamW) per encoder.

Every encoder in the registry (small and full-size) with the ``mlp`` and ``transformer`` heads,
a batch of ``--batch`` random images at ``--size`` px, finetuned (encoder trained too), plus the
frozen case (head only, on cached features, the way ``train_probe`` trains frozen encoders).
Ratios are against a reference measured in the same run: ``resnet-small`` + ``mlp`` finetuned.
Also prints the CPU load average so numbers from a shared machine can be read in context.

``suite``: phantoms -> probe dataset (in domain) and the bundled real CT -> probe dataset
(transfer); per small encoder: finetuned runs (``--finetuned-heads``, default mlp), frozen
runs (the encoder random by default; ``--frozen-from TASK`` adds the encoder finetuned on TASK)
with the mlp and transformer heads (``--both``: and both); every run evaluated zero-shot on the
real CT; Table 1; wall time per stage and training images/s per run in ``OUT/suite.json``.
Stages whose output exists are reused (delete a folder to redo it). ``--slice-samples
relpos=8 relpos_organ=24`` draws that many samples per slice for a whole-slice task (both
datasets; 24 draws of relpos_organ reach nearly all 8 variants of each slice);
``--task-epochs`` / ``--frozen-task-epochs relpos=5`` set a task's epochs. The default tasks
are all but ``relpos_organ`` (with it the suite took 32 min on one thread, over its 30 min
budget): ``--relpos-organ`` adds it, ``--tasks`` sets the list (``--tasks relpos_organ`` in its
own OUT: 2.7 min).

Usage: python benchmarks/bench_probes.py [speed] [--size 224] [--batch 16] [--steps 3]
           [--threads 1] [--encoders resnet-small vit-tiny resnet50 vit-b32]
       python benchmarks/bench_probes.py suite --out DIR [--phantoms 12] [--epochs 5]
           [--frozen-epochs 25] [--max-per-case N] [--frozen-from random orient] [--both]
           [--slice-samples relpos=8 relpos_organ=24] [--task-epochs T=N]
           [--frozen-task-epochs relpos=5] [--finetuned-heads mlp] [--tasks T ...] [--relpos-organ]
           [--perm-heads transformer] [--perm-epochs 48] [--no-dihedral] [--threads 1]

``--perm-heads`` adds, per encoder, a finetuned run of the permutation task alone with that
head (default ``transformer``: its set-level read-out, docs/probes.md), beside the finetuned
``mlp`` run of every task: ``--perm-epochs`` epochs (48), each training crop turned /
mirrored at random before its tiles are reshuffled (``--no-dihedral``: not).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from radspatial.probes.encoders import create_encoder, list_encoders
from radspatial.probes.fitting import loss_fn
from radspatial.probes.heads import create_head
from radspatial.probes.tasks import TASK_NAMES

# the real protocol's default: SPAR's class sets (relpos2, orient5), Tables 1 and 5's other
# probes, and symmetry with the organ mask; relpos / orient / count by --tasks
REAL_TASKS = [
    "localize", "permutation", "relpos2", "orient5", "symmetry", "symmetry_mask", "size", "distance"
]  # fmt: skip


def step_rate(encoder: str, head: str, *, size: int, batch: int, steps: int, frozen: bool) -> dict:
    """Images/s of training steps after one warm-up step."""
    torch.manual_seed(0)
    enc = create_encoder(encoder, image_size=size)
    h = create_head(head, dim=enc.dim, grid=enc.grid, out_shape=(8,))
    x = torch.rand(batch, 3, size, size)
    y = torch.randint(0, 8, (batch,))
    if frozen:
        enc.requires_grad_(False).eval()
        with torch.no_grad():
            feats = enc(x)
        params = list(h.parameters())
    else:
        params = list(enc.parameters()) + list(h.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    times = []
    for i in range(steps + 1):
        t = time.perf_counter()
        out = h(feats) if frozen else h(enc(x))
        loss = loss_fn("classification", out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i:  # the first step warms up allocators and kernels
            times.append(time.perf_counter() - t)
    per_step = sorted(times)[len(times) // 2]
    n_params = sum(p.numel() for p in enc.parameters()) + sum(p.numel() for p in h.parameters())
    return {"images_per_s": batch / per_step, "s_per_step": per_step, "params_m": n_params / 1e6}


def speed(args: argparse.Namespace) -> None:
    unknown = set(args.encoders) - set(list_encoders())
    if unknown:
        raise SystemExit(f"unknown encoders: {sorted(unknown)}")
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(
        f"batch {args.batch} at {args.size} px, {args.steps} timed steps (median), torch "
        f"{torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPUs, load average "
        f"before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n"
    )
    kw = {"size": args.size, "batch": args.batch, "steps": args.steps}
    ref = step_rate("resnet-small", "mlp", frozen=False, **kw)["images_per_s"]
    print("| encoder | head | trained | params (M) | s/step | images/s | vs resnet-small+mlp |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name in args.encoders:
        for head in ("mlp", "transformer"):
            for frozen in (False, True):
                r = step_rate(name, head, frozen=frozen, **kw)
                what = "head only (frozen)" if frozen else "encoder + head"
                print(
                    f"| {name} | {head} | {what} | {r['params_m']:.1f} | {r['s_per_step']:.3f} "
                    f"| {r['images_per_s']:.1f} | {r['images_per_s'] / ref:.2f}x |",
                    flush=True,
                )
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


def suite(args: argparse.Namespace) -> None:
    from radspatial.core.io import atomic_write_json
    from radspatial.core.runtime import bundled_example
    from radspatial.imaging.volumes import Case, read_cases_csv
    from radspatial.phantoms import write_phantoms
    from radspatial.probes import build_probes, probe_info
    from radspatial.probes.evaluate import evaluate_probe
    from radspatial.probes.table import write_table
    from radspatial.probes.train import train_probe

    out = Path(args.out)
    stages: dict[str, float] = {}
    t_all, cpu_all = time.perf_counter(), time.process_time()

    def stage(name: str, done: Path, fn) -> None:
        if done.exists():
            print(f"[suite] {name}: reusing {done}", flush=True)
            return
        t = time.perf_counter()
        fn()
        stages[name] = round(time.perf_counter() - t, 1)
        print(f"[suite] {name}: {stages[name]} s", flush=True)

    draws = task_counts(args.slice_samples, "--slice-samples")
    build = {
        "seed": args.seed,
        "tasks": args.tasks,
        "max_per_case": args.max_per_case,
        "slice_samples": draws,
        "crop": args.crop,
        "context": args.context,
        "progress": False,
    }
    # the transfer sets are small (one real case each): all of it, uncapped, the same draws
    build_ct = {**build, "max_per_case": None}
    if args.protocol == "real":  # patient A's slabs in domain; B and C zero-shot
        from radspatial.probes.protocol import default_cases

        real = default_cases(out / "cases", n_slabs=args.slabs)
        in_domain = out / "probes" / "patient_a"
        stage(
            "build patient A",
            in_domain / "probes.json",
            lambda: build_probes(real["in_domain"], in_domain, **build),
        )
        transfers = {k: out / "probes" / k for k in ("patient_b", "patient_c")}
        for k, folder in transfers.items():
            stage(
                f"build {k}",
                folder / "probes.json",
                lambda k=k, folder=folder: build_probes(real[k], folder, **build_ct),
            )
    else:
        ph, in_domain = out / "phantoms", out / "probes" / "phantoms"
        shape = tuple(args.shape)
        stage(
            "phantoms",
            ph / "cases.csv",
            lambda: write_phantoms(
                ph, n=args.phantoms, seed=args.seed, shape=shape, progress=False
            ),
        )
        stage(
            "build phantoms",
            in_domain / "probes.json",
            lambda: build_probes(read_cases_csv(ph / "cases.csv"), in_domain, **build),
        )
        example = [Case("example_ct", *bundled_example(), "totalsegmentator")]
        ct = out / "probes" / "example_ct"
        stage("build example CT", ct / "probes.json", lambda: build_probes(example, ct, **build_ct))
        transfers = {"": ct}
    counts = {t: v["counts"] for t, v in probe_info(in_domain)["tasks"].items()}
    print(f"[suite] in-domain samples per task: {counts}", flush=True)

    common = {
        "device": args.device,
        "seed": args.seed,
        "progress": args.progress,
        "threads": args.threads,
        "batch_size": args.batch,
        "image_size": args.image_size,
    }
    ft_epochs = task_counts(args.task_epochs, "--task-epochs")
    fz_epochs = task_counts(args.frozen_task_epochs, "--frozen-task-epochs")
    runs: list[tuple[str, dict]] = []
    for enc in args.encoders:
        ft = {"encoder": enc, "epochs": args.epochs, "task_epochs": ft_epochs, **common}
        fz = {"encoder": enc, "epochs": args.frozen_epochs, "task_epochs": fz_epochs, **common}
        heads = ("mlp", "transformer", "both") if args.both else ("mlp", "transformer")
        runs += [(f"{enc}-finetuned-{h}", {**ft, "head": h}) for h in args.finetuned_heads]
        perm = {  # Level 2 only: the set-level read-out, its own epochs and augmentation
            **ft,
            "tasks": ["permutation"],
            "task_epochs": {"permutation": args.perm_epochs},
            "dihedral": args.dihedral,
        }
        runs += [
            (f"{enc}-finetuned-{h}", {**perm, "head": h})
            for h in args.perm_heads
            if h not in args.finetuned_heads and "permutation" in args.tasks
        ]
        for src in args.frozen_from:  # "random", or a task: that finetuned-mlp run's encoder
            ck = (
                "random"
                if src == "random"
                else out / "runs" / f"{enc}-finetuned-mlp" / "models" / src
            )
            runs += [(f"{enc}-frozen-{src}-{h}", {**fz, "head": h, "frozen": ck}) for h in heads]
    dirs = []
    for name, kw in runs:
        run = out / "runs" / name
        stage(
            f"train {name}",
            run / "models",
            lambda run=run, kw=kw: train_probe(in_domain, run, **kw),
        )
        dirs.append(run)
        if args.protocol == "real":  # test-split predictions in domain, for the organ tables
            ind = out / "in_domain" / name
            stage(
                f"in-domain predictions {name}",
                ind / "results.json",
                lambda run=run, ind=ind: evaluate_probe(run, in_domain, ind, device=args.device),
            )
        for key, data in transfers.items():
            ev = out / "transfer" / key / name if key else out / "transfer" / name
            stage(
                f"transfer {key or 'example_ct'} {name}",
                ev / "results.json",
                lambda run=run, ev=ev, data=data: evaluate_probe(run, data, ev, device=args.device),
            )
            dirs.append(ev)
    md = write_table(dirs, out / "table")
    if args.protocol == "real":
        organ_tables(out, [name for name, _ in runs], {"patient_a": in_domain, **transfers})
    speeds = {name: training_speed(out / "runs" / name) for name, _ in runs}
    wall = round(time.perf_counter() - t_all, 1)
    cpu = round(time.process_time() - cpu_all, 1)  # ~ the wall time on an idle core (1 thread)
    load = os.getloadavg()
    summary = {
        "cpu_s": cpu,
        "wall_s": wall,
        "stages_s": stages,
        "load_average_end": load,
        "training_images_per_s": speeds,
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    atomic_write_json(out / "suite.json", summary)
    print(md.read_text())
    print("[suite] training images/s per run (all tasks: total images / total training time):")
    for name, sp in speeds.items():
        print(f"  {name}: {sp['images_per_s']} img/s ({sp['images']} images, {sp['train_s']} s)")
    print(f"[suite] wall {wall} s ({wall / 60:.1f} min), CPU {cpu} s ({cpu / 60:.1f} min)")
    print(f"[suite] load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


def organ_tables(out: Path, names: list[str], datasets: dict[str, Path]) -> Path:
    """Tables 3 and 4's shape (per organ, WORD's columns) for every run and patient."""
    from radspatial.core.io import atomic_write_bytes
    from radspatial.probes.organ_table import WORD_COLUMNS, localize_chance, organ_table_md

    parts = []
    for task, title in (
        ("localize", "MED px @512, lower is better (Table 3's shape)"),
        ("permutation", "per-tile accuracy %, chance 6.25 (Table 4's shape)"),
    ):
        for key, data in datasets.items():
            base = out / ("in_domain" if key == "patient_a" else f"transfer/{key}")
            # a run of other tasks (the permutation-only runs) has no column here
            runs = [
                (n, base / n)
                for n in names
                if (base / n / "predictions" / f"{task}.jsonl").is_file()
            ]
            tile = {k: 100 / 16 for _, k in WORD_COLUMNS}
            chance = localize_chance(data) if task == "localize" else tile
            parts.append(
                f"### {task}: {key}, {title}\n\n{organ_table_md(runs, data, task, chance)}"
            )
    path = out / "table" / "organs.md"
    atomic_write_bytes(path, "\n".join(parts).encode())
    return path


def task_counts(items: list[str], option: str) -> dict[str, int]:
    """``["relpos=8", "distance=4"]`` -> ``{"relpos": 8, "distance": 4}``."""
    out = {}
    for item in items:
        task, _, k = item.partition("=")
        if not k.isdigit():
            raise SystemExit(f"{option}: expected TASK=N, got {item!r}")
        out[task] = int(k)
    return out


def training_speed(run: Path) -> dict:
    """Images/s of a finished run over all its tasks, from its results.json."""
    tasks = json.loads((run / "results.json").read_text())["tasks"].values()
    n = sum(t["training"]["steps"] * t["training"]["batch_size"] for t in tasks)
    sec = sum(t["training"]["train_s"] for t in tasks)
    return {
        "images": n,
        "train_s": round(sec, 1),
        "images_per_s": round(n / sec, 1) if sec else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", choices=["speed", "suite"], default="speed")
    ap.add_argument("--size", type=int, default=224, help="speed: image size")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3, help="speed: timed steps")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: speed 1, suite all)"
    )
    ap.add_argument("--encoders", nargs="*", default=None)
    ap.add_argument("--out", type=Path, help="suite: output folder")
    ap.add_argument(
        "--protocol",
        choices=["real", "phantoms"],
        default="real",
        help="suite: real = patient A's z slabs in domain, patients B (DICOM) and C (MR) "
        "zero-shot (probes/protocol.py); phantoms = the earlier phantoms -> example CT",
    )
    ap.add_argument("--device", default="cpu", help="suite: cpu or cuda (resnet50 / vit-b32 rows)")
    ap.add_argument("--slabs", type=int, default=5, help="suite, real: slabs of patient A")
    ap.add_argument("--phantoms", type=int, default=12)
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 256, 48])
    ap.add_argument("--max-per-case", type=int, default=None, help="suite: default all")
    ap.add_argument("--epochs", type=int, default=5, help="suite: finetuned runs")
    ap.add_argument(
        "--frozen-epochs", type=int, default=25, help="suite: frozen runs (cached features)"
    )
    ap.add_argument(
        "--frozen-from",
        nargs="*",
        default=["random"],
        help="suite: frozen encoders: random and/or tasks whose finetuned-mlp encoder to freeze",
    )
    ap.add_argument("--both", action="store_true", help="suite: also the both head (frozen)")
    ap.add_argument(
        "--slice-samples",
        nargs="*",
        default=["relpos=8", "relpos_organ=24"],
        metavar="TASK=N",
        help="suite: samples drawn per slice for whole-slice tasks (default relpos=8 "
        "relpos_organ=24)",
    )
    ap.add_argument(
        "--tasks",
        nargs="*",
        default=None,
        help="suite: these tasks (default: all but relpos_organ)",
    )
    ap.add_argument("--relpos-organ", action="store_true", help="suite: also relpos_organ")
    ap.add_argument(
        "--task-epochs",
        nargs="*",
        default=["permutation=24"],
        metavar="TASK=N",
        help="suite, finetuned runs (default permutation=24: a fresh tile order every step)",
    )
    ap.add_argument(
        "--frozen-task-epochs",
        nargs="*",
        default=["relpos=5"],
        metavar="TASK=N",
        help="suite, frozen runs (default relpos=5: relpos has 8 samples per slice)",
    )
    ap.add_argument(
        "--finetuned-heads",
        nargs="*",
        default=["mlp"],
        choices=["mlp", "transformer", "both"],
        help="suite: heads of the finetuned runs (default mlp; transformer adds ~9 min)",
    )
    ap.add_argument(
        "--perm-heads",
        nargs="*",
        default=["transformer"],
        choices=["mlp", "transformer", "both"],
        help="suite: finetuned runs of the permutation task alone with these heads (default "
        "transformer: the tiles' tokens attend to each other; benchmarks/RESULTS.md)",
    )
    ap.add_argument(
        "--dihedral",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="suite: the --perm-heads runs turn / mirror each crop at random before reshuffling "
        "(default on)",
    )
    ap.add_argument(
        "--perm-epochs", type=int, default=48, help="suite: epochs of the --perm-heads runs"
    )
    ap.add_argument(
        "--context",
        choices=["keep", "remove"],
        default=None,
        help="suite: organ crops with the surrounding tissue, or without it (SPAR-Bench's "
        "context-free tiles); default remove (real), keep (phantoms)",
    )
    ap.add_argument(
        "--crop", type=int, default=None, help="suite: crop px (default 128 real, 96 phantoms)"
    )
    ap.add_argument(
        "--image-size", type=int, default=None, help="suite: encoder input px (default its own)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args()
    if args.mode == "speed":
        args.threads = args.threads or 1
        args.encoders = args.encoders or ["resnet-small", "vit-tiny", "resnet50", "vit-b32"]
        speed(args)
    else:
        if args.out is None:
            raise SystemExit("suite needs --out DIR")
        args.encoders = args.encoders or ["resnet-small", "vit-tiny"]
        args.batch = 32 if args.batch == 16 else args.batch
        real = args.protocol == "real"
        args.context = args.context or ("remove" if real else "keep")
        args.crop = args.crop or (128 if real else 96)  # 128: a 32 px tile per 128 px encoder
        if real and not any(x.startswith("orient=") for x in args.slice_samples):
            args.slice_samples = [*args.slice_samples, "orient=8"]  # one patient: 112 slices
        tasks = args.tasks or (
            REAL_TASKS if real else [t for t in TASK_NAMES if t != "relpos_organ"]
        )
        args.tasks = tasks + ["relpos_organ"] * (args.relpos_organ and "relpos_organ" not in tasks)
        suite(args)


if __name__ == "__main__":
    main()
