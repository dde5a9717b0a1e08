"""``radspatial serve`` under abuse: slow sockets and worst-case images.

    .venv/bin/python benchmarks/bench_server_dos.py                   # this checkout
    PYTHONPATH=/path/to/other/src .venv/bin/python benchmarks/bench_server_dos.py  # another one

Starts ``radspatial serve --localizer markers`` in its own process (API key from the environment,
as an operator would) and prints two tables:

- slow sockets: ``--slow`` connections each send a request line and one header, then one more
  header line a second (never finishing); meanwhile a normal authenticated client makes a fresh
  connection every 0.2 s for ``--seconds`` and asks ``GET /v1/models`` and a chat completion
  (512 px PNG). Printed: statuses, time to the first 200, latency p50 / max of the 200s.
- worst-case images: ``--concurrent`` authenticated chat requests at once, each with a 1-bit
  4096 x 4096 PNG (about 2 kB); statuses, wall time, and the server's RSS after start-up and its
  peak (``VmHWM`` of /proc/PID/status, Linux only).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from PIL import Image, ImageDraw

KEY = "sk-bench-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def normal_png() -> bytes:
    image = Image.new("RGB", (512, 512))
    draw = ImageDraw.Draw(image)
    draw.ellipse((100, 100, 112, 112), fill=(255, 0, 0))
    draw.ellipse((300, 400, 312, 412), fill=(0, 0, 255))
    return png(image)


def chat_body(image: bytes) -> bytes:
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    parts = [
        {"type": "text", "text": "Is the red dot above the blue dot?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    return json.dumps({"model": "agent:markers", "messages": [{"role": "user", "content": parts}]})


def status_kb(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1))


@contextmanager
def server_process() -> Iterator[tuple[subprocess.Popen, str]]:
    code = "import sys; from radspatial.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "serve", "--port", "0", "--localizer", "markers"]
    env = os.environ | {"RADSPATIAL_API_KEY": KEY}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        line = proc.stdout.readline()
        match = re.search(r"(http://\S+/v1)", line)
        if match is None:
            raise RuntimeError(f"the server did not start: {line!r}")
        yield proc, match.group(1)
    finally:
        proc.terminate()
        proc.wait(10)


def drip(port: int, count: int, stop: threading.Event) -> Counter:
    """``count`` sockets that never finish their headers; returns how they ended."""
    import socket

    socks, ended = [], Counter()
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        s.settimeout(0)
        socks.append(s)
    n = 0
    while not stop.wait(1.0):
        n += 1
        for s in list(socks):
            try:
                s.sendall(f"X-Drip-{n}: y\r\n".encode())
                if s.recv(4096) == b"":
                    raise ConnectionResetError
            except BlockingIOError:
                continue
            except OSError:
                ended["closed by the server"] += 1
                socks.remove(s)
                s.close()
    ended["still open at the end"] = len(socks)
    for s in socks:
        s.close()
    return ended


def bench_slow(slow: int, seconds: float) -> None:
    body = chat_body(normal_png())
    with server_process() as (_, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        httpx.get(f"{url}/models", headers=AUTH).raise_for_status()
        stop, ended = threading.Event(), Counter()
        dripper = threading.Thread(target=lambda: ended.update(drip(port, slow, stop)))
        dripper.start()
        time.sleep(1.0)  # every slow socket connected and accepted
        results: list[tuple[str, float, int, float]] = []
        t_start = time.perf_counter()
        while (now := time.perf_counter()) - t_start < seconds:
            for what in ("models", "chat"):
                t0 = time.perf_counter()
                try:
                    if what == "models":
                        r = httpx.get(f"{url}/models", headers=AUTH, timeout=30)
                    else:
                        r = httpx.post(
                            f"{url}/chat/completions", content=body, headers=AUTH, timeout=30
                        )
                    status = r.status_code
                except httpx.HTTPError:
                    status = 0
                results.append((what, t0 - t_start, status, time.perf_counter() - t0))
            time.sleep(max(0.0, 0.2 - (time.perf_counter() - now)))
        stop.set()
        dripper.join()
    ok = [r for r in results if r[2] == 200]
    statuses = Counter(r[2] for r in results)
    print(f"\n{slow} slow sockets, normal authenticated requests for {seconds:.0f} s:")
    print(f"  requests {len(results)}, statuses {dict(sorted(statuses.items()))}")
    if ok:
        lat = sorted(1000 * r[3] for r in ok)
        print(f"  first 200 after {ok[0][1]:.2f} s; 200s: p50 {statistics.median(lat):.0f} ms, "
              f"max {lat[-1]:.0f} ms")  # fmt: skip
    print(f"  slow sockets: {dict(ended)}")


def bench_memory(concurrent: int) -> None:
    worst = png(Image.new("1", (4096, 4096)))
    body = chat_body(worst)
    with server_process() as (proc, url):
        httpx.post(f"{url}/chat/completions", content=chat_body(normal_png()), headers=AUTH)
        base = status_kb(proc.pid, "VmRSS")
        statuses: list[int] = []
        barrier = threading.Barrier(concurrent)

        def one() -> None:
            barrier.wait()
            try:
                r = httpx.post(f"{url}/chat/completions", content=body, headers=AUTH, timeout=600)
                statuses.append(r.status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=one) for _ in range(concurrent)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        peak = status_kb(proc.pid, "VmHWM")
    print(f"\n{concurrent} concurrent chat requests, 1-bit 4096 x 4096 PNG ({len(worst)} bytes):")
    print(f"  statuses {dict(Counter(statuses))}, wall {wall:.1f} s")
    print(f"  server RSS after start-up {base / 1024:.0f} MB, peak {peak / 1024:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=130, help="slow sockets (default 130)")
    parser.add_argument("--seconds", type=float, default=10.0, help="normal traffic duration")
    parser.add_argument("--concurrent", type=int, default=32, help="worst-case requests at once")
    parser.add_argument("--only", choices=("slow", "memory"), help="run one part")
    args = parser.parse_args()
    import radspatial

    print(f"radspatial from {Path(radspatial.__file__).parent}")
    if args.only in (None, "slow"):
        bench_slow(args.slow, args.seconds)
    if args.only in (None, "memory"):
        bench_memory(args.concurrent)


if __name__ == "__main__":
    main()
