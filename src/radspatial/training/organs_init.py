"""Warm start of ``organs`` training from an earlier model folder (same architecture).

Every tensor whose shape matches is copied; tensors with a class axis (the last layers) are
copied class by class for the label ids both models know, the new classes keep their fresh
initialisation. On a CPU budget this saves most of the steps a cold start needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def warm_start(net: Any, model_dir: Path, classes: list[tuple[int, str]]) -> dict[str, Any]:
    """Load ``model_dir``'s weights into ``net`` where they fit; returns a record for
    config.json (source sha256, tensors copied, classes carried over)."""
    import torch
    from safetensors.torch import load_file

    from radspatial.core.io import sha256_file
    from radspatial.nets import unet

    old_cfg = unet.read_config(Path(model_dir))
    old_ids = [int(c["label_id"]) for c in old_cfg["classes"]]
    new_ids = [label_id for label_id, _ in classes]
    pairs = [(i, old_ids.index(lid)) for i, lid in enumerate(new_ids) if lid in old_ids]
    new_idx = torch.tensor([p[0] for p in pairs])
    old_idx = torch.tensor([p[1] for p in pairs])
    old = load_file(str(Path(model_dir) / unet.WEIGHTS))
    state = net.state_dict()
    copied = 0
    for key, fresh in state.items():
        src = old.get(key)
        if src is None or src.dim() != fresh.dim():
            continue
        src = src.to(fresh.dtype)
        if src.shape == fresh.shape:
            state[key] = src
            copied += 1
            continue
        axes = [d for d in range(fresh.dim()) if src.shape[d] != fresh.shape[d]]
        if any(src.shape[d] != len(old_ids) or fresh.shape[d] != len(new_ids) for d in axes):
            continue
        out, part = fresh.clone(), src
        for d in axes:
            part = part.index_select(d, old_idx)
        n = len(axes)
        index = tuple(new_idx.view([-1 if k == j else 1 for k in range(n)]) for j in range(n))
        view = out.movedim(axes, list(range(len(axes))))
        view[index] = part.movedim(axes, list(range(len(axes))))
        state[key] = out
        copied += 1
    net.load_state_dict(state)
    return {
        "from": str(model_dir),
        "weights_sha256": sha256_file(Path(model_dir) / unet.WEIGHTS),
        "tensors_copied": f"{copied}/{len(state)}",
        "classes_carried": int(len(pairs) - 1),
        "classes_new": int(len(new_ids) - len(pairs)),
        "old_data": np.asarray(old_cfg.get("data", {}).get("real", {}).get("ct", "")).tolist(),
        **provenance(old_cfg),
    }


def provenance(old_cfg: dict) -> dict[str, Any]:
    """What the warm start's weights were trained on and how (every file's sha256 its
    config.json lists, seed, command, device and time, and its own warm start in turn), so
    that a model's config.json names all the data behind it, not only its last run's."""
    real = old_cfg.get("data", {}).get("real", {})
    data = {k: v for k, v in real.items() if k != "plausibility"}
    keep = ("command", "device", "steps_done", "train_seconds", "train_cpu_seconds", "threads")
    training = {k: v for k, v in old_cfg.get("training", {}).items() if k in keep}
    return {
        "init_data": data,
        "init_seed": old_cfg.get("seed"),
        "init_training": training,
        "init_init": old_cfg.get("training", {}).get("init"),
    }
