"""Throughput of the openai-compat backend against the fake server at a fixed injected latency.

    .venv/bin/python benchmarks/bench_eval.py                 # 100 ms latency, 256 requests
    .venv/bin/python benchmarks/bench_eval.py --latency-ms 50 --concurrency 1 8 64

With latency L and concurrency c the best possible rate is c / L requests per second. Targets:
every row reaches >= 0.8 x c / L, and concurrency 32 is >= 20x the sequential rate measured in the
same run. By default the server runs in its own process (``tests/fake_server.py``), so its threads
do not compete with the client for the GIL; ``--in-process`` runs it in a thread instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image

from radspatial.models import Reply, Request, create_backend

TESTS = Path(__file__).resolve().parents[1] / "tests"


def small_png(i: int) -> bytes:
    """A 64x64 grayscale PNG that differs per request (about 1-2 kB)."""
    img = Image.new("L", (64, 64), color=i % 256)
    img.putpixel((i % 64, (i // 64) % 64), 255 - i % 256)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@contextmanager
def fake_server(latency_ms: float, *, in_process: bool) -> Iterator[str]:
    """Yield the base URL of a running fake server."""
    if in_process:
        sys.path.insert(0, str(TESTS))
        from fake_server import FakeChatServer

        with FakeChatServer(latency_s=latency_ms / 1000.0) as server:
            yield server.base_url
        return
    cmd = [sys.executable, str(TESTS / "fake_server.py"), "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def measure(base_url: str, concurrency: int, n: int) -> tuple[float, float]:
    """Wall seconds and client CPU seconds to answer ``n`` image requests at ``concurrency``."""
    backend = create_backend(f"openai-compat:fake@{base_url}", concurrency=concurrency)
    reqs = [
        Request(key=f"c{concurrency}-{i}", prompt=f"Q{i}", image_png=small_png(i)) for i in range(n)
    ]
    failed: list[Reply] = []

    def on_reply(req: Request, reply: Reply) -> None:
        if reply.text is None:
            failed.append(reply)

    t0, cpu0 = time.perf_counter(), time.process_time()
    backend.generate(reqs, on_reply)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if failed:
        raise RuntimeError(f"{len(failed)} requests failed, e.g. {failed[0].error}")
    return wall, cpu


HEADER = ("conc", "reqs", "wall s", "req/s", "ideal", "ratio", "speedup", "cpu ms/req")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--sequential-requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--in-process", action="store_true", help="server in a thread")
    args = parser.parse_args()
    latency = args.latency_ms / 1000.0

    where = "thread" if args.in_process else "process"
    print(f"fake server latency {args.latency_ms:g} ms, in its own {where}")
    if importlib.util.find_spec("sniffio") is None:
        print("note: sniffio is not installed, so httpcore 1.0 retries a failing import ~10 times")
        print("      per request (~1 ms CPU each request); `pip install sniffio` removes that cost")
    print(" ".join(f"{h:>8}" for h in HEADER))
    ok = True
    rates: dict[int, float] = {}
    with fake_server(args.latency_ms, in_process=args.in_process) as base_url:
        measure(base_url, 4, 8)  # warm-up: imports, first connections
        for c in args.concurrency:
            n = args.sequential_requests if c == 1 else args.requests
            wall, cpu = measure(base_url, c, n)
            rates[c] = n / wall
            ideal = c / latency
            ok &= rates[c] >= 0.8 * ideal
            speedup = f"{rates[c] / rates[1]:.1f}x" if 1 in rates else "-"
            cells = (c, n, f"{wall:.2f}", f"{rates[c]:.1f}", f"{ideal:.0f}")
            cells += (f"{rates[c] / ideal:.2f}", speedup, f"{1000 * cpu / n:.2f}")
            print(" ".join(f"{x:>8}" for x in cells))
    if 32 in rates and 1 in rates:
        ok &= rates[32] >= 20 * rates[1]
    print(f"targets (every ratio >= 0.8; c=32 speedup >= 20x): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
