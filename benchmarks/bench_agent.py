"""Agent speed on CPU: per-question latency of each localizer, and ``radspatial serve`` throughput.

    .venv/bin/python benchmarks/bench_agent.py                     # markers, mask; 50 clients
    .venv/bin/python benchmarks/bench_agent.py --unet-model runs/unet --requests 400

Generates a dataset from the bundled example CT (512 px, rq2 + rq3 + as, label images exported)
and prints two tables:

- per question, ``Agent.answer`` on an already decoded image (parse + localize + verify) for
  markers, mask (with the exported label image) and unet (with ``--unet-model``): mean, p50, p90,
  max ms and correct / wrong / abstain counts. Target: mean < 20 ms for markers and mask.
- the server (``radspatial.agent.server.server.serve`` in its own process, stopped with Ctrl-C):
  ``--clients`` threads, each with its own keep-alive connection, send ``--requests`` chat calls
  (MIRP prompt + PNG, prepared beforehand) per agent; requests/s, latency p50/p90, errors and
  answers. Target: zero errors. The client process shares this machine's cores.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from radspatial.agent.pipeline.agent import Agent, load_image
from radspatial.agent.pipeline.types import Context
from radspatial.agent.server.server import build_agents
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.runtime import bundled_example
from radspatial.eval.items import EvalItem, load_items
from radspatial.eval.prompts import MIRP
from radspatial.imaging.volumes import Case


def make_dataset(out: Path, size: int, as_count: int) -> list[EvalItem]:
    ct, seg = bundled_example()
    config = GenerateConfig(
        seed=1, size=size, as_count=as_count, setups=("rq2", "rq3", "as"), export_masks=True
    )
    case = Case("example_ct_sm", ct, seg, "totalsegmentator")
    build_dataset([case], config, out, log=lambda message: None)
    return load_items(out)


def mask_of(item: EvalItem) -> np.ndarray | None:
    """The exported label image of an item (uint16, shown frame), if any."""
    path = item.extra.get("mask")
    if not path:
        return None
    with Image.open(path) as img:
        return np.asarray(img)


def usable(items: list[EvalItem], localizer: str) -> list[EvalItem]:
    """The mask localizer needs a label image: the blank-image (AS) items have none."""
    return [i for i in items if i.extra.get("mask")] if localizer == "mask" else items


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def bench_localizer(agent: Agent, items: list[EvalItem], repeats: int) -> dict[str, float]:
    """Per-question ms of ``agent.answer`` on decoded images, and the answers' correctness."""
    images = [load_image(i.image.read_bytes()) for i in items]
    masks = [mask_of(i) for i in items] if agent.localizer.name == "mask" else [None] * len(items)
    warm = Context(mask=masks[0])
    agent.answer(images[0], MIRP.render(items[0]), context=warm, from_prompt=True)  # fill caches
    times: list[float] = []
    right = wrong = abstain = 0
    for _ in range(repeats):
        for item, image, mask in zip(items, images, masks, strict=True):
            context, prompt = Context(mask=mask), MIRP.render(item)
            t0 = time.perf_counter()
            result = agent.answer(image, prompt, context=context, from_prompt=True)
            times.append(1000 * (time.perf_counter() - t0))
            if result.answer is None:
                abstain += 1
            elif result.answer == item.expected:
                right += 1
            else:
                wrong += 1
    return {
        "n": len(times),
        "mean": statistics.fmean(times),
        "p50": pct(times, 50),
        "p90": pct(times, 90),
        "max": max(times),
        "right": right,
        "wrong": wrong,
        "abstain": abstain,
    }


@contextmanager
def server_process(threads: int, unet_model: Path | None) -> Iterator[str]:
    """Run ``serve()`` in a child process (as ``radspatial serve`` would); yield its base URL."""
    code = (
        "import sys; from radspatial.agent.server.server import serve; "
        "serve(port=0, threads=int(sys.argv[1]), model_dir=sys.argv[2] or None)"
    )
    args = [sys.executable, "-c", code, str(threads), str(unet_model or "")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://\S+/v1)", line)
        if not match:
            raise RuntimeError(f"the server did not start: {line!r}")
        yield match[1]
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: serve() stops cleanly
        proc.wait(timeout=30)


def request_bodies(items: list[EvalItem], model: str, n: int) -> list[tuple[bytes, str]]:
    """``n`` prepared (JSON body, expected content) pairs, cycling through ``items``."""
    out = []
    for k in range(n):
        item = items[k % len(items)]
        image = base64.b64encode(item.image.read_bytes()).decode()
        content = [
            {"type": "text", "text": MIRP.render(item)},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
        ]
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        if model == "agent:mask":
            mask = base64.b64encode(Path(item.extra["mask"]).read_bytes()).decode()
            body["radspatial_mask"] = f"data:image/png;base64,{mask}"
        out.append((json.dumps(body).encode(), str(item.expected)))
    return out


def load_test(url: str, bodies: list[tuple[bytes, str]], clients: int) -> dict[str, float]:
    """``clients`` threads with one keep-alive connection each drain a shared queue."""
    todo: queue.SimpleQueue[tuple[bytes, str]] = queue.SimpleQueue()
    for body in bodies:
        todo.put(body)
    latencies: list[float] = []
    counts = {"errors": 0, "right": 0, "other": 0}
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=120, headers={"Content-Type": "application/json"}) as http:
            while True:
                try:
                    body, expected = todo.get_nowait()
                except queue.Empty:
                    return
                t0 = time.perf_counter()
                try:
                    response = http.post(f"{url}/chat/completions", content=body)
                    ok = response.status_code == 200
                    text = response.json()["choices"][0]["message"]["content"] if ok else None
                except httpx.HTTPError:
                    ok, text = False, None
                with lock:
                    latencies.append(1000 * (time.perf_counter() - t0))
                    key = "errors" if not ok else "right" if text == expected else "other"
                    counts[key] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    return {
        "n": len(bodies),
        "wall": wall,
        "rps": len(bodies) / wall,
        **counts,
        "p50": pct(latencies, 50),
        "p90": pct(latencies, 90),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--as-count", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2, help="passes over the items (latency)")
    parser.add_argument("--unet-model", type=Path, default=None)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=300, help="server calls per agent")
    parser.add_argument("--threads", type=int, default=32, help="server: agent calls at once")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        items = make_dataset(Path(tmp) / "data", args.size, args.as_count)
        print(
            f"dataset: {len(items)} questions at {args.size} px in {time.perf_counter() - t0:.1f} s"
            f"; {os.cpu_count()} CPUs"
        )
        names = ["markers", "mask"] + ["unet"] * (args.unet_model is not None)
        agents = build_agents(names, model_dir=args.unet_model)

        print("\nper question (Agent.answer on a decoded image; target mean < 20 ms)")
        print(
            f"{'localizer':<10} {'n':>5} {'mean':>7} {'p50':>7} {'p90':>7} {'max':>7}"
            f" {'right':>6} {'wrong':>6} {'abst.':>6}"
        )
        for name in names:
            r = bench_localizer(agents[f"agent:{name}"], usable(items, name), args.repeats)
            print(
                f"{name:<10} {r['n']:>5} {r['mean']:>7.1f} {r['p50']:>7.1f} {r['p90']:>7.1f}"
                f" {r['max']:>7.1f} {r['right']:>6} {r['wrong']:>6} {r['abstain']:>6}"
            )

        print(
            f"\nserver: {args.clients} concurrent clients, {args.requests} calls per agent, "
            f"threads={args.threads}"
        )
        print(
            f"{'model':<14} {'n':>5} {'wall s':>7} {'req/s':>7} {'p50 ms':>8} {'p90 ms':>8}"
            f" {'errors':>7} {'right':>6} {'other':>6}"
        )
        with server_process(args.threads, args.unet_model) as url:
            for model in agents:
                bodies = request_bodies(usable(items, model[6:]), model, args.requests)
                r = load_test(url, bodies, args.clients)
                print(
                    f"{model:<14} {r['n']:>5} {r['wall']:>7.2f} {r['rps']:>7.1f}"
                    f" {r['p50']:>8.1f} {r['p90']:>8.1f} {r['errors']:>7} {r['right']:>6}"
                    f" {r['other']:>6}"
                )


if __name__ == "__main__":
    main()
