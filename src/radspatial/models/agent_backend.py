"""``agent`` / ``agent:<localizer>[@<model_dir>]``: the modular agent as an evaluator backend.

Plain ``agent`` is the ``auto`` pipeline: the marker reader for refs that carry a marker, the
shipped ``organs`` localizer otherwise.

The prompt may be a whole template (MIRP's ends with "Q: <question>"); the agent extracts the
question from it. An abstention is a reply the answer parser reads as invalid. With the ``mask``
localizer, the dataset must have been generated with ``--export-masks``: each request then
carries its label image (an oracle: validates datasets and other localizers).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from radspatial.models.base import Decoding, OnReply, Reply, Request, register_backend


def _context(meta: dict[str, Any], truth: Mapping[str, Any]):
    """The localizer's context: the plane and modality, and for a localizer that reads truth
    (``reads_truth``) the label image, the CT and where the image came from."""
    from PIL import Image

    from radspatial.agent.pipeline.types import Context
    from radspatial.core.labels import load_table

    meta = {**meta, **truth}
    keys = ("slice_index", "transform", "plane", "modality")
    extra = {k: meta[k] for k in keys if meta.get(k) is not None}
    if not meta.get("mask"):
        return Context(ct_path=meta.get("ct"), extra=extra)
    mask = np.asarray(Image.open(meta["mask"]))
    if isinstance(meta.get("label_names"), dict):  # the mask file's own names (DICOM SEG)
        names = {int(k): str(v) for k, v in meta["label_names"].items()}
    else:
        names = load_table(meta.get("labels"), group=meta.get("grouping") == "mirp").names
    return Context(mask=mask, labels=names, ct_path=meta.get("ct"), extra=extra)


class AgentBackend:
    deterministic = True  # no sampling: every run answers an item the same (``demo`` runs once)

    def __init__(self, spec: str, localizer: str, options: dict[str, Any], threads: int) -> None:
        from radspatial.agent.pipeline.agent import Agent

        self.spec = spec
        self.localizer = localizer
        self.options = options
        self.threads = max(1, threads)
        self.agent = Agent(localizer, **options)
        # the mask and TotalSegmentator localizers read the item's truth (label image, CT)
        self.reads_truth = getattr(self.agent.localizer, "reads_truth", False) is True

    def describe(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "backend": "agent",
            "localizer": self.localizer,
            "options": {k: str(v) for k, v in self.options.items()},
            "margin_px": self.agent.margin,
            # the margin is px of an image this size, scaled to each image (None: as given)
            "margin_reference_px": self.agent.margin_reference,
        }

    def _one(self, req: Request) -> Reply:
        t0 = time.perf_counter()
        try:
            result = self.agent.answer(
                req.image_png, req.prompt, context=_context(req.meta, req.truth), from_prompt=True
            )
        except Exception as exc:  # one bad item must not stop the run
            return Reply(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
        return Reply(result.text, None, time.perf_counter() - t0, {"trace": result.trace})

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        if self.threads == 1:
            for req in requests:
                on_reply(req, self._one(req))
            return
        with ThreadPoolExecutor(self.threads) as pool:
            for req, reply in zip(requests, pool.map(self._one, requests), strict=True):
                on_reply(req, reply)


@register_backend("agent", oracles=("mask",))  # the mask localizer reads the true label image
def _agent(rest: str, *, decoding: Decoding, concurrency: int = 1) -> AgentBackend:
    # plain ``agent``: the best built-in pipeline (markers for marker refs, organs otherwise)
    localizer, _, model_dir = (rest or "auto").partition("@")
    options: dict[str, Any] = {"model_dir": model_dir} if model_dir else {}
    spec = "agent:" + rest if rest else "agent"
    try:
        return AgentBackend(spec, localizer, options, threads=min(concurrency, 8))
    except (TypeError, OSError) as exc:  # a model folder given/missing where it must not be
        usage = "expected agent, agent:<localizer> or agent:unet@<model_dir>"
        raise ValueError(f"{spec}: {exc} ({usage})") from None
