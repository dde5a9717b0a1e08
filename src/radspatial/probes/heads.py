"""Probe heads: read a task's output from an encoder's :class:`Features`.

- ``mlp``: a one-hidden-layer MLP on the pooled vector (the classic linear-ish probe).
- ``transformer``: a few pre-norm transformer layers over the token sequence with learned
  positional embeddings and learned query tokens; one query per output slot (16 for the
  permutation task: query ``i`` reads out where the tile shown at position ``i`` came from),
  one query otherwise. With ``per_slot`` (the permutation's default) the slots are the tiles
  themselves: the token grid pooled to one token per shown tile, self-attention among the 16
  tile tokens with no shown-position code (the shown order says nothing about the original
  one, so the read-out is permutation-equivariant: shuffling the tiles shuffles the outputs),
  and each tile's own token read out as its logits over the original positions.
- ``both``: the two read-outs concatenated and mapped by one linear layer; written as the sum
  of the two heads' linear read-outs, which is the same function (``W [a; b] = W_a a + W_b b``).

Output shape ``(B, *out_shape)``: ``(2,)`` regression, ``(C,)`` classification, ``(16, 16)``
permutation (logits per shown tile over original positions).

Example::

    head = create_head("transformer", dim=256, grid=(4, 4), out_shape=(16, 16))
    logits = head(encoder(images))  # (B, 16, 16)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from radspatial.core.registry import Registry
from radspatial.probes.encoders import Features

HEADS: Registry[Callable[..., nn.Module]] = Registry("head")


def register_head(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    return HEADS.register(name)


def list_heads() -> list[str]:
    return HEADS.names()


def create_head(
    name: str, *, dim: int, grid: Sequence[int], out_shape: Sequence[int], **kwargs: Any
) -> nn.Module:
    """A randomly initialised head; ``head.spec()`` is the JSON that rebuilds it."""
    return HEADS.get(name)(dim=dim, grid=tuple(grid), out_shape=tuple(out_shape), **kwargs)


@dataclass(frozen=True)
class MLPOptions:
    hidden: int = 512
    dropout: float = 0.1
    # slot outputs (the permutation's 16 tiles): the MLP reads each slot's own pooled region
    # of the token grid (shared weights) instead of the whole image's mean, which cannot say
    # which tile is where (a mean is the same for every arrangement of the tiles)
    per_slot: bool = False


@dataclass(frozen=True)
class TransformerOptions:
    width: int = 128
    layers: int = 2
    heads: int = 4
    dropout: float = 0.1
    # slot outputs (the permutation's tiles): one token per slot, the slots attend to each
    # other, no shown-position code (a set-level read-out; see the module docstring)
    per_slot: bool = False


class _Head(nn.Module):
    """The shape every head shares (``dim``, ``grid``, ``out_shape``) and its options: a
    subclass names its options dataclass in ``options_type`` (None: kwargs kept as given)."""

    name = ""
    options_type: type | None = None

    def __init__(
        self, *, dim: int, grid: tuple[int, ...], out_shape: tuple[int, ...], **kwargs: Any
    ) -> None:
        super().__init__()
        if not 1 <= len(out_shape) <= 2:
            raise ValueError(f"out_shape {out_shape}: expected (K,) or (slots, K)")
        self.dim, self.grid, self.out_shape = (
            int(dim),
            tuple(int(g) for g in grid),
            tuple(int(s) for s in out_shape),
        )
        self.options = self.options_type(**kwargs) if self.options_type else None
        self.kwargs = asdict(self.options) if self.options else dict(kwargs)
        self.build(self.dim, self.options)

    def build(self, dim: int, opt: Any) -> None:
        """Create the layers (``opt``: an instance of ``options_type``)."""

    def spec(self) -> dict[str, Any]:
        kw = {"dim": self.dim, "grid": list(self.grid), "out_shape": list(self.out_shape)}
        return {"name": self.name, "kwargs": {**kw, **self.kwargs}}


@register_head("mlp")
class MLPHead(_Head):
    name = "mlp"
    options_type = MLPOptions

    def build(self, dim: int, opt: MLPOptions) -> None:
        self.trunk = nn.Sequential(
            nn.LayerNorm(dim), nn.Linear(dim, opt.hidden), nn.GELU(), nn.Dropout(opt.dropout)
        )
        self.slot_grid = _slot_grid(self.out_shape) if opt.per_slot else None
        width = self.out_shape[-1] if self.slot_grid else math.prod(self.out_shape)
        self.readout = nn.Linear(opt.hidden, width)

    def forward(self, feats: Features) -> torch.Tensor:
        if self.slot_grid is None:
            out = self.readout(self.trunk(feats.pooled))
            return out.view(out.shape[0], *self.out_shape)
        return self.readout(self.trunk(slot_tokens(feats, self.grid, self.slot_grid)))


def slot_tokens(feats: Features, grid: tuple[int, ...], slot_grid: tuple[int, int]) -> torch.Tensor:
    """(B, s * s, D): the token grid average-pooled to one token per slot (row-major)."""
    b, _, d = feats.tokens.shape
    tokens = feats.tokens.transpose(1, 2).reshape(b, d, *grid)
    return nn.functional.adaptive_avg_pool2d(tokens, slot_grid).flatten(2).transpose(1, 2)


def _slot_grid(out_shape: tuple[int, ...]) -> tuple[int, int]:
    """(s, s) for ``(s * s, K)`` slot outputs (per_slot needs a square number of slots)."""
    side = math.isqrt(out_shape[0]) if len(out_shape) == 2 else 0
    if side * side != (out_shape[0] if len(out_shape) == 2 else -1):
        raise ValueError(f"per_slot needs (s*s, K) outputs, got {out_shape}")
    return side, side


@register_head("transformer")
class TransformerHead(_Head):
    name = "transformer"
    options_type = TransformerOptions

    def build(self, dim: int, opt: TransformerOptions) -> None:
        width = opt.width
        self.slot_grid = _slot_grid(self.out_shape) if opt.per_slot else None
        self.slots = self.out_shape[0] if len(self.out_shape) == 2 else 1
        self.proj = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, width))
        if self.slot_grid is None:  # per_slot: no positions, no queries (the tiles are slots)
            self.pos = nn.Parameter(torch.zeros(1, self.grid[0] * self.grid[1], width))
            self.queries = nn.Parameter(torch.zeros(1, self.slots, width))
            nn.init.trunc_normal_(self.pos, std=0.02)
            nn.init.trunc_normal_(self.queries, std=0.02)
        layer = nn.TransformerEncoderLayer(
            width, opt.heads, dim_feedforward=2 * width, dropout=opt.dropout, activation="gelu",
            batch_first=True, norm_first=True,
        )  # fmt: skip
        self.blocks = nn.TransformerEncoder(layer, opt.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, self.out_shape[-1])

    def forward(self, feats: Features) -> torch.Tensor:
        if self.slot_grid is not None:  # (B, slots, width): the tiles attend to each other
            x = self.blocks(self.proj(slot_tokens(feats, self.grid, self.slot_grid)))
            return self.readout(self.norm(x))
        tokens = self.proj(feats.tokens)
        if tokens.shape[1] != self.pos.shape[1]:
            raise ValueError(
                f"transformer head built for {self.pos.shape[1]} tokens, got {tokens.shape[1]}"
            )
        x = torch.cat([self.queries.expand(tokens.shape[0], -1, -1), tokens + self.pos], dim=1)
        q = self.norm(self.blocks(x)[:, : self.slots])
        out = self.readout(q)
        return out.view(out.shape[0], *self.out_shape)


@register_head("both")
class BothHead(_Head):
    name = "both"

    def __init__(
        self, *, dim: int, grid: tuple[int, ...], out_shape: tuple[int, ...], **kwargs: Any
    ) -> None:
        super().__init__(dim=dim, grid=grid, out_shape=out_shape, **kwargs)
        mlp_kw = {k[4:]: v for k, v in kwargs.items() if k.startswith("mlp_")}
        tr_kw = {k[12:]: v for k, v in kwargs.items() if k.startswith("transformer_")}
        if set(kwargs) - {f"mlp_{k}" for k in mlp_kw} - {f"transformer_{k}" for k in tr_kw}:
            raise ValueError(
                f"both head: options must start with mlp_ or transformer_, got {sorted(kwargs)}"
            )
        self.mlp = MLPHead(dim=dim, grid=grid, out_shape=out_shape, **mlp_kw)
        self.transformer = TransformerHead(dim=dim, grid=grid, out_shape=out_shape, **tr_kw)

    def forward(self, feats: Features) -> torch.Tensor:
        return self.mlp(feats) + self.transformer(feats)
