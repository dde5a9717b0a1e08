"""``hf:`` on Ray replicas vs one local replica, on the tiny random LLaVA of the tests (CPU).

    .venv/bin/python benchmarks/bench_eval_ray.py                 # 96 calls, batch 4, 16 tokens
    .venv/bin/python benchmarks/bench_eval_ray.py --n 192 --max-tokens 32

Rows, all in one run on the same requests (model load and Ray start-up timed apart):

- local x1, torch's default threads (every core): the plain ``hf:`` backend;
- local x1, 1 thread: what one replica gets when each replica is one CPU worker;
- Ray x1 and Ray x2 (one CPU and one torch thread each): ``--executor ray --replicas N``.

Ray's overhead per call = (Ray x1 - local x1 at 1 thread) / n: moving the request (PNG + prompt)
to the actor and the reply back, plus the scheduling, with the same compute on both sides.
Every row must give the same replies (greedy); the script checks it. On a 2-core machine shared
with other work, 2 replicas can only gain over 1 thread, not over torch using both cores.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from radspatial.models import Decoding, Request, create_backend

TESTS = Path(__file__).resolve().parents[1] / "tests"


def requests(n: int) -> list[Request]:
    out = []
    for i in range(n):
        pixels = (np.random.default_rng(i).random((64, 64, 3)) * 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        prompt = f"Is the liver left of the spleen in this CT slice? Answer yes or no. {i}"
        out.append(Request(f"k{i}", prompt, buf.getvalue()))
    return out


def timed(backend, reqs: list[Request]) -> tuple[float, dict[str, str | None]]:
    texts: dict[str, str | None] = {}
    t0 = time.perf_counter()
    backend.generate(reqs, lambda req, rep: texts.__setitem__(req.key, rep.text))
    return time.perf_counter() - t0, texts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    import ray
    import torch

    sys.path.insert(0, str(TESTS))
    from tiny_vlm import build_tiny_llava

    decoding = Decoding(max_tokens=args.max_tokens)
    reqs = requests(args.n)
    rows: list[tuple[str, float, float]] = []  # name, start-up s, generate s
    replies = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = f"hf:{build_tiny_llava(Path(tmp) / 'tiny')}"
        default_threads = torch.get_num_threads()
        for threads in (default_threads, 1):
            torch.set_num_threads(threads)
            t0 = time.perf_counter()
            local = create_backend(model, decoding=decoding, batch_size=args.batch_size)
            start = time.perf_counter() - t0
            timed(local, reqs[: args.batch_size])  # warm-up
            seconds, replies[f"local x1 ({threads} thr)"] = timed(local, reqs)
            rows.append((f"local x1 ({threads} thread(s))", start, seconds))
        torch.set_num_threads(default_threads)

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            for n in (1, 2):
                t0 = time.perf_counter()
                backend = create_backend(
                    model, decoding=decoding, executor="ray", replicas=n,
                    batch_size=args.batch_size,
                )  # fmt: skip
                start = time.perf_counter() - t0
                timed(backend, reqs[: args.batch_size * n])  # warm-up
                seconds, replies[f"ray x{n}"] = timed(backend, reqs)
                rows.append((f"Ray x{n} (1 CPU each)", start, seconds))
                backend.close()
        finally:
            ray.shutdown()

    print(f"{args.n} calls, batch {args.batch_size}, {args.max_tokens} new tokens, "
          f"{os.cpu_count()} cores, torch default threads {default_threads}")  # fmt: skip
    print(f"{'':<26}{'start-up s':>11}{'generate s':>11}{'calls/s':>9}{'vs local':>9}")
    base = rows[0][2]
    for name, start, seconds in rows:
        print(f"{name:<26}{start:>11.1f}{seconds:>11.2f}{args.n / seconds:>9.1f}"
              f"{base / seconds:>8.2f}x")  # fmt: skip
    by = {name: seconds for name, _, seconds in rows}
    overhead = (by["Ray x1 (1 CPU each)"] - by["local x1 (1 thread(s))"]) / args.n
    per_batch = overhead * args.batch_size * 1000
    print(f"Ray overhead per call (Ray x1 - local x1 at 1 thread): {overhead * 1000:+.1f} ms; "
          f"per batch of {args.batch_size}: {per_batch:+.1f} ms")  # fmt: skip
    same = all(r == replies["local x1 (1 thr)"] for r in replies.values())
    print(f"identical replies in every row: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
