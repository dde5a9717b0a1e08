"""A probe training run's settings (``TrainConfig``): read by ``probes/train.py`` (the run) and
``probes/fitting.py`` (one task's model); the choices are described in ``probes/train.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    encoder: str
    head: str
    frozen: str | None = None
    epochs: int = 30
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.05
    schedule: str = "cosine"  # cosine | constant
    warmup: float = 0.05  # fraction of the steps
    jitter: float = 0.1  # finetuning only: gain 1 +- jitter, offset +- jitter / 2
    seed: int = 0
    device: str = "cpu"
    image_size: int | None = None  # None: the encoder's default
    encoder_kwargs: dict[str, Any] | None = None  # more create_encoder options (e.g. width)
    threads: int | None = None  # torch CPU threads while training (None: leave as is)
    task_epochs: dict[str, int] | None = None  # task -> epochs, overriding ``epochs``
    # permutation: the mlp head reads each tile's region (False: the whole image's mean, the
    # earlier read-out, which cannot tell one arrangement of the tiles from another)
    per_tile: bool = True
    # permutation: every training crop gets a fresh random tile order at every step (its
    # stored order is one of 16!); False: the stored order only (the earlier training).
    # Needs the pixels, so frozen runs on cached features keep the stored order.
    reshuffle: bool = True
    # permutation, with reshuffle: each training crop is also turned by a random one of the
    # square's 8 rotations / mirror images before its tiles are reshuffled (new organ shapes)
    dihedral: bool = False

    def epochs_for(self, task: str) -> int:
        return (self.task_epochs or {}).get(task, self.epochs)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("epochs and batch_size must be >= 1 and lr > 0")
        if any(int(e) < 1 for e in (self.task_epochs or {}).values()):
            raise ValueError(f"task_epochs must be >= 1, got {self.task_epochs}")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule must be cosine or constant, got {self.schedule!r}")

    def encoder_options(self) -> dict[str, Any]:
        kw = dict(self.encoder_kwargs or {})
        if self.image_size:
            kw["image_size"] = self.image_size
        return kw
