"""Probe training speed: images/s of one training step (forward + backward + AdamW) per encoder.

Every encoder in the registry (small and full-size) with the ``mlp`` and ``transformer`` heads,
a batch of ``--batch`` random images at ``--size`` px, finetuned (encoder trained too), plus the
frozen case (head only, on cached features, the way ``train_probe`` trains frozen encoders).
Ratios are against a reference measured in the same run: ``resnet-small`` + ``mlp`` finetuned.
Also prints the CPU load average so numbers from a shared machine can be read in context.

Usage: python benchmarks/bench_probes.py [--size 224] [--batch 16] [--steps 3] [--threads 1]
       [--encoders resnet-small vit-tiny resnet50 vit-b32]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from radspatial.probes.encoders import create_encoder, list_encoders
from radspatial.probes.heads import create_head
from radspatial.probes.train import loss_fn


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--encoders", nargs="*", default=["resnet-small", "vit-tiny", "resnet50", "vit-b32"]
    )
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
