"""``radspatial probe vlm``: probe an ``hf:`` VLM's own stages on an eval run's items."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

import radspatial.cli.common as common


def _layers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated layer numbers, e.g. 8,-1"
        ) from None


def vlm_arguments(v: argparse.ArgumentParser) -> None:
    v.add_argument("--run", type=Path, required=True, help="eval run folder of an hf: model")
    v.add_argument(
        "--out", type=Path, help="folder to write (default: RUN/probe_vlm, where report finds it)"
    )
    v.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    v.add_argument("--model", help="hf:PATH instead of the run's model (same weights, moved)")
    v.add_argument("--data", type=Path, help="dataset folder instead of the run's")
    v.add_argument(
        "--layers", type=_layers, default=(), help="language-model layers to probe at the image "
        "tokens, e.g. 8,-1 (-1: the last; default: none)"
    )  # fmt: skip
    v.add_argument(
        "--split-by", choices=["patient", "slice"], default="patient",
        help="the unit held out together (no slice or patient in two folds)",
    )  # fmt: skip
    v.add_argument("--epochs", type=int, default=200, help="full-batch steps per probe fit")
    v.add_argument("--device", default="auto", help="torch device (auto: cuda, mps, cpu)")
    v.add_argument("--dtype", default="auto", help="model dtype (auto: bfloat16 on cuda)")


def cmd_probe_vlm(args: argparse.Namespace) -> int:
    from radspatial.probes.vlm import VlmProbeConfig, probe_vlm
    from radspatial.probes.vlm_figure import stage_label
    from radspatial.probes.vlm_fit import FitOptions

    flags = {f.name for f in fields(VlmProbeConfig)} - {"fit"}  # flags named as its fields
    fit = FitOptions(epochs=args.epochs, device=args.device)  # auto: the model's device
    config = VlmProbeConfig(**{k: getattr(args, k) for k in flags}, fit=fit)
    out = args.out or args.run / "probe_vlm"
    s = probe_vlm(args.run, out, config, overwrite=args.overwrite, log=_log)
    print(f"probe vlm: {out} ({s['model']}, {s['n_items']} items, {s['n_groups']} groups)")
    seeds = ", ".join(map(str, s["seeds"]))
    print(f"  probes: {s['n_folds']} folds of whole {s['split_by']} groups, seeds {seeds}, "
          f"{args.epochs} epochs (the same numbers on a rerun)")  # fmt: skip
    print(f"  {'stage':<14} {'pooled':>8} {'tokens':>8}   McNemar p vs answer (tokens)")
    for stage in s["stage_order"]:
        p, t = s["stages"][stage]["pooled"], s["stages"][stage]["tokens"]
        mc = t["vs_answer"]["mcnemar_p"]
        print(f"  {stage_label(stage):<14} {p['accuracy']:>8.1%} {t['accuracy']:>8.1%}   {mc:.3g}")
    print(f"  {'answer':<14} {s['answer']['accuracy']:>8.1%}   (chance 50.0%, majority "
          f"{s['majority']['accuracy']:.1%})")  # fmt: skip
    for readout, walk in s["chain"].items():
        print(f"  information lost ({readout}): {walk['lost_at'] or 'no significant drop'}")
    return 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


VLM_COMMAND = common.Command(
    "vlm",
    "probe an hf: VLM's encoder, projector and LM on an eval run's items, joined with its answers",
    "For every relative-position item the run answered, one forward pass of the item's prompt "
    "through the model (no generation) reads each stage's tokens (encoder, projector, the "
    "--layers); small MLP probes, cross-fitted over held-out patient or slice groups with 3 "
    "seeds, say whether each stage holds the asked pair's relation, and McNemar's test on the "
    "items finds where the model's answers lose it. Writes OUT/items.jsonl, summary.json and "
    "stages.png; docs/probes.md says how to read them.",
    arguments=vlm_arguments,
    run=cmd_probe_vlm,
)
