"""CPU time of the ``organs`` localizer with the channels-last forward against the plain MONAI
forward, interleaved call by call in one process (both see the same machine load).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_unet_fast.py --repeats 30

Image: the 512 px MIRP RQ1 image of ``bench_organs.cpu_time`` (liver + spleen), shipped weights,
4 test-time copies, 1 torch thread. Prints, for ``locate`` and for the network's forward alone
(the batch of 4 copies), the median and best process CPU time of each and the ratio of the
medians (fast / plain), and checks that both give the same localizations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from PIL import Image

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
IMAGE = SHARED / "mirp_sample" / "RQ1" / "images" / "amos_img3_slice68.png"


def _cpu_ms(fn) -> float:
    start = time.process_time()
    fn()
    return 1000 * (time.process_time() - start)


def interleaved(calls: dict, repeats: int) -> dict:
    """Median / best CPU ms of each named call, run in turn ``repeats`` times (one warm-up)."""
    for fn in calls.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            times[name].append(_cpu_ms(fn))
    out = {
        k: {"cpu_median_ms": round(statistics.median(v), 1), "cpu_best_ms": round(min(v), 1)}
        for k, v in times.items()
    }
    fast, plain = (out[k]["cpu_median_ms"] for k in calls)
    out["ratio_cpu_median"] = round(fast / plain, 3)
    return out


def same_answers(a: list, b: list) -> bool:
    """Both localizations found or not, the same centres and details, scores within 1e-4."""
    for f, g in zip(a, b, strict=True):
        if (f is None) != (g is None):
            return False
        if f is None:
            continue
        if (f.xy, f.details) != (g.xy, g.details) or abs(f.score - g.score) > 1e-4:
            return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import torch

    from radspatial.agent.localizers.organs import organs, organs_checks, organs_predict
    from radspatial.agent.pipeline.types import Context, Ref
    from radspatial.nets import unet_fast

    torch.set_num_threads(a.threads)
    image = np.asarray(Image.open(IMAGE).convert("RGB"))
    loc = organs.OrgansLocalizer()
    net = loc.model.net
    refs, ctx = [Ref(name="liver"), Ref(name="spleen")], Context()
    applies = unet_fast.applies

    def plain_locate():
        unet_fast.applies = lambda n, x: False  # the module itself
        try:
            return loc.locate(image, refs, ctx)
        finally:
            unet_fast.applies = applies

    same = same_answers(loc.locate(image, refs, ctx), plain_locate())
    x = torch.from_numpy(organs_predict.grey_u8(image)[:128, :128] / 127.5 - 1).float()[None, None]
    batch = torch.cat([organs_checks.dihedral(x, k) for k in organs_checks.VARIANT_ORDER[:4]])
    with torch.inference_mode():
        forward = interleaved(
            {"fast": lambda: unet_fast.forward(net, batch), "plain": lambda: net(batch)},
            a.repeats,
        )
    located = interleaved(
        {"fast": lambda: loc.locate(image, refs, ctx), "plain": plain_locate}, a.repeats
    )
    report = {"threads": torch.get_num_threads(), "repeats": a.repeats, "same_answers": same}
    print(json.dumps({**report, "locate": located, "forward": forward}))


if __name__ == "__main__":
    main()
