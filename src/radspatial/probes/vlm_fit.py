"""SPAR-style relational probes on a VLM's stages, cross-fitted so every item gets a prediction
from a probe that never saw its slice (or patient).

Target, per relative-position item: does the pair's first object lie before the second along
the asked axis in the shown image (left of, for left/right questions; above, for above/below)?
The pair is put in a fixed order first (label id, then marker text), so the target is a fact of
the image, not of the question's word order; a probe right on it answers the item right.
Read-outs, as in SPAR: ``pooled`` (the mean of the stage's tokens) and ``tokens`` (the token at
each object's point, concatenated); both get the asked axis as two extra inputs.

Folds are groups (``slice``: one slice's items in every setup and marker; ``patient``: one
case), up to 5, fewer when the items are few (``n_folds``: at least ``MIN_PER_FOLD`` items a
held-out fold on average, and never under 2); three seeds (0, 1, 2) draw the folds and the
probes' initialisation. Under ``ONE_THREAD_BELOW`` items a CPU fit runs on one thread: such fits
are too small to gain from more (on a busy machine they lose), and one thread sums in one order,
so a rerun on any machine gives the same predictions. Each fit is the
SPAR probes' MLP head (``probes/heads``) trained full-batch with the probes' loss
(``probes/fitting.loss_fn``) on standardised features. The ``majority`` read-out predicts the
training folds' commoner target; chance is 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

READOUTS = ("pooled", "tokens")
SEEDS = (0, 1, 2)
MAX_FOLDS = 5
MIN_PER_FOLD = 12
ONE_THREAD_BELOW = 500


@dataclass(frozen=True)
class ProbeItem:
    """One item's probe inputs: its group (fold unit), axis (0: x, 1: y) and target."""

    id: str
    group: str
    axis: int
    target: int


@dataclass(frozen=True)
class FitOptions:
    epochs: int = 200
    lr: float = 1e-3
    weight_decay: float = 1e-2
    hidden: int = 256
    device: str = "cpu"  # "auto" (probe_vlm): the model's device


def n_folds(n_items: int, n_groups: int) -> int:
    """How many folds: up to ``MAX_FOLDS``, no more than the groups, and few enough that a
    held-out fold has ``MIN_PER_FOLD`` items on average (2 at least).

    Example:
        >>> n_folds(60, 29), n_folds(24, 12), n_folds(1000, 3)
        (5, 2, 3)
    """
    return max(2, min(MAX_FOLDS, n_groups, n_items // MIN_PER_FOLD))


def folds(groups: Sequence[str], seed: int) -> np.ndarray:
    """Fold index per item: groups shuffled by ``seed`` and dealt round-robin into
    ``n_folds`` folds."""
    unique = sorted(set(groups))
    if len(unique) < 2:
        raise ValueError(
            f"probe vlm needs at least 2 groups to hold some out, got {len(unique)} "
            "(use --split-by slice, or more cases)"
        )
    order = np.random.default_rng(seed).permutation(len(unique))
    k = n_folds(len(groups), len(unique))
    fold_of = {unique[i]: n % k for n, i in enumerate(order)}
    return np.array([fold_of[g] for g in groups])


def design(features: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Features plus the asked axis, one-hot."""
    return np.concatenate([features, np.eye(2, dtype=np.float32)[axes]], axis=1)


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = train.mean(0), train.std(0) + 1e-6
    return (train - mean) / std, (test - mean) / std


def _fit_predict(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int, opt: FitOptions
) -> np.ndarray:
    """The MLP probe head fitted on (x_train, y_train); its class for each test row."""
    import torch

    from radspatial.probes.encoders import Features
    from radspatial.probes.fitting import loss_fn
    from radspatial.probes.heads import create_head

    x_train, x_test = _standardise(x_train, x_test)
    torch.manual_seed(seed)
    dim = x_train.shape[1]
    head = create_head("mlp", dim=dim, grid=(1, 1), out_shape=(2,), hidden=opt.hidden)
    head.to(opt.device).train()
    optim = torch.optim.AdamW(head.parameters(), lr=opt.lr, weight_decay=opt.weight_decay)
    xt = torch.as_tensor(x_train, dtype=torch.float32, device=opt.device)
    yt = torch.as_tensor(y_train, dtype=torch.long, device=opt.device)
    feats = Features(xt, xt[:, None])
    for _ in range(opt.epochs):
        optim.zero_grad()
        loss_fn("classification", head(feats), yt).backward()
        optim.step()
    head.eval()
    xs = torch.as_tensor(x_test, dtype=torch.float32, device=opt.device)
    with torch.no_grad():
        return head(Features(xs, xs[:, None])).argmax(-1).cpu().numpy()


def cross_fit(
    x: np.ndarray, items: Sequence[ProbeItem], seed: int, opt: FitOptions
) -> dict[str, np.ndarray]:
    """Out-of-fold predictions of one read-out's probe and of the majority rule, one seed."""
    y = np.array([i.target for i in items])
    fold = folds([i.group for i in items], seed)
    probe, majority = np.zeros(len(items), int), np.zeros(len(items), int)
    for k in np.unique(fold):
        test, train = fold == k, fold != k
        if len(np.unique(y[train])) < 2:  # one class to learn from: the probe says it
            probe[test] = y[train][0]
        else:
            probe[test] = _fit_predict(x[train], y[train], x[test], seed * 1000 + int(k), opt)
        majority[test] = int(y[train].mean() >= 0.5)
    return {"probe": probe, "majority": majority}


def fit_stage(
    pooled: np.ndarray,
    tokens: np.ndarray,
    items: Sequence[ProbeItem],
    opt: FitOptions,
    seeds: Sequence[int] = SEEDS,
) -> dict[str, np.ndarray]:
    """Per read-out (and ``majority``): the items' predictions, shape (seeds, items)."""
    import torch

    threads = torch.get_num_threads()
    if str(opt.device) == "cpu" and len(items) < ONE_THREAD_BELOW:
        torch.set_num_threads(1)
    try:
        return _fit_stage(pooled, tokens, items, opt, seeds)
    finally:
        torch.set_num_threads(threads)


def _fit_stage(
    pooled: np.ndarray,
    tokens: np.ndarray,
    items: Sequence[ProbeItem],
    opt: FitOptions,
    seeds: Sequence[int],
) -> dict[str, np.ndarray]:
    axes = np.array([i.axis for i in items])
    inputs = {"pooled": design(pooled, axes), "tokens": design(tokens, axes)}
    out: dict[str, list[np.ndarray]] = {"pooled": [], "tokens": [], "majority": []}
    for seed in seeds:
        for name, x in inputs.items():
            got = cross_fit(x, items, seed, opt)
            out[name].append(got["probe"])
            if name == "pooled":
                out["majority"].append(got["majority"])
    return {k: np.stack(v) for k, v in out.items()}
