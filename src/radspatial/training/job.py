"""The ``train unet`` job spec: every option of ``radspatial train unet`` (and its deprecated
name ``agent train``) and of ``radspatial.train_unet``, declared once (``core/jobspec``), and
:func:`run_train_unet`, which both faces call.

Light on purpose: the command line builds its parser from this module, so nothing heavy (numpy,
torch, MONAI) is imported at module level; the trainer (``training/unet_train``) loads when the
job runs, after its quick refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.core.jobspec import ParamError, option

UNET_STRIDES = 8  # 2 ** (levels - 1) of TrainConfig's default (16, 32, 64, 128) channels


# fmt: off
@dataclass(frozen=True, kw_only=True)
class TrainUnetJob:
    """What one ``train unet`` is asked: the dataset, the model folder, the few settings a
    user changes (the rest are ``training/unet_train.TrainConfig``'s defaults)."""

    data: Path = option(type=Path, positional=True, annotation="str | Path",
        help="dataset generated with --export-masks")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="model folder to write")
    epochs: int | None = option(None, type=int, help="epochs (default: the trainer's)")
    size: int | None = option(None, type=int,
        help="network input size in px (default: the trainer's)")
    seed: int = option(0, type=int, help="seed of every random draw")
    threads: int | None = option(None, type=int, help="torch CPU threads (default: torch's)")
    progress: bool = option(True, cli=False,
        help="print progress on stderr (the command line always does)")
# fmt: on


def check_train_unet(job: TrainUnetJob) -> None:
    """The refusals that need no torch: an ``out`` on its ``data``, a count below 1, a size the
    U-Net cannot take (each a :class:`ParamError` naming its parameter)."""
    from radspatial.core.safepath import check_disjoint
    from radspatial.nets.unet_config import MAX_SIZE

    check_disjoint(Path(job.out), {"data": Path(job.data)})
    for name in ("epochs", "threads"):
        value = getattr(job, name)
        if value is not None and value < 1:
            raise ParamError(name, f"{{param}} must be >= 1, got {value}")
    if job.size is not None and (not 16 <= job.size <= MAX_SIZE or job.size % UNET_STRIDES):
        raise ParamError("size", f"{{param}} {job.size} must be in 16..{MAX_SIZE} px and "
                         f"divisible by the U-Net strides ({UNET_STRIDES})")  # fmt: skip


def run_train_unet(job: TrainUnetJob) -> dict[str, Any]:
    """Trains the unet localizer as ``job`` asks (``training/unet_train.train_unet``); returns
    the validation metrics (also ``out/metrics.json``)."""
    check_train_unet(job)  # before torch loads: a quick refusal
    from radspatial.training.unet_train import TrainConfig, train_unet

    given = {k: getattr(job, k) for k in ("epochs", "size", "threads") if getattr(job, k)}
    config = TrainConfig(seed=job.seed, **given)
    return train_unet(Path(job.data), Path(job.out), config, progress=job.progress)
