"""The ``phantom`` job spec: every option of ``radspatial phantom`` and ``radspatial.phantom``,
declared once (``core/jobspec``), and :func:`run_phantom`, which both faces call.

Light on purpose: the command line builds its parser from this module, so nothing heavy is
imported at module level (``phantoms/__init__`` imports its names on first use).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from radspatial.core.jobspec import csv_list, option, spacing, triple

VARIANT_HELP = (
    "anatomy variant(s), comma-separated from normal, situs_inversus, displaced, or 'mixed' (all "
    "three); phantom i gets variant i mod the list's length, e.g. normal,situs_inversus with --n "
    "4: normal, situs_inversus, normal, situs_inversus"
)
RAY_HELP = "Ray cluster to join (default: env RAY_ADDRESS, else a local Ray with --workers CPUs)"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class PhantomJob:
    """What one ``phantom`` is asked: how many phantoms, of what shape and anatomy, where to."""

    out: Path = option(type=Path, positional=True, annotation="str | Path", help="output folder")
    n: int = option(1, type=int, help="number of phantoms")
    seed: int = option(0, type=int, help="seed; phantom i depends on (seed, i)")
    shape: tuple[int, int, int] = option((512, 512, 200), type=triple(int), csv=True,
        annotation="tuple[int, int, int] | str", help="X,Y,Z voxels")
    spacing: tuple[float, float, float] | None = option(None, type=spacing, csv=True,
        annotation="tuple[float, float, float] | str | None",
        help="sx,sy,sz mm (default ~0.8,0.8,2.5)")
    variant: tuple[str, ...] = option(("normal",), type=csv_list, csv=True,
        annotation="str | Sequence[str]", help=VARIANT_HELP)
    workers: int = option(1, type=int, help="phantoms built in parallel")
    executor: str = option("local", choices=["local", "ray"],
        help="local process pool, or Ray (pip install 'radspatial[ray]'): same output bytes")
    ray_address: str | None = option(None, help=RAY_HELP)
    progress: bool = option(True, cli=False,
        help="print progress on stderr (the command line always does)")
# fmt: on


def run_phantom(job: PhantomJob) -> Path:
    """Writes the phantoms ``job`` asks for (``phantoms/io.write_phantoms``); returns the path
    of their ``cases.csv``."""
    from radspatial.phantoms.io import write_phantoms

    variant = job.variant[0] if len(job.variant) == 1 else job.variant
    return write_phantoms(
        Path(job.out), n=job.n, seed=job.seed, shape=job.shape, spacing=job.spacing,
        variant=variant, workers=job.workers, progress=job.progress, executor=job.executor,
        address=job.ray_address,
    )  # fmt: skip
