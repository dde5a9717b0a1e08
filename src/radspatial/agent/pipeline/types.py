"""The localizer protocol and registry (``LOCALIZERS``), and the agent's records.

The records (``Ref``, ``ParsedQuestion``, ``Found``, ``Decision``, ``Context``, ``Scene``,
``ParseError``) live in ``questions/records.py``, below the agent, with the question types that
make and read them; they are re-exported here for localizers and users.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from radspatial.core.registry import Registry
from radspatial.questions.records import (
    Context,
    Decision,
    Found,
    ParsedQuestion,
    ParseError,
    Ref,
    Scene,
)

__all__ = [
    "LOCALIZERS",
    "Context",
    "Decision",
    "Found",
    "Localizer",
    "ParseError",
    "ParsedQuestion",
    "Ref",
    "Scene",
    "create_localizer",
    "list_localizers",
    "register_localizer",
]


class Localizer(Protocol):
    name: str
    # declared traits (class attributes; absent means False): ``thread_safe`` (one instance
    # may serve parallel requests; else the agent server gives it a lock) and ``reads_truth``
    # (it is given the item's truth: an oracle or a reader of the CT); and an optional
    # ``second_opinion`` (another Localizer, or None) the agent asks where this one's
    # localization is not trusted (``Agent._second_opinion``; ``auto``'s second model folder)

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        """One result per ref (None when not found). ``image`` is RGB uint8 (H, W, 3)."""


LocalizerFactory = Callable[..., Localizer]
# built-in localizers register themselves when imported; heavy imports stay inside functions
LOCALIZERS: Registry[LocalizerFactory] = Registry(
    "localizer",
    (
        "localizers.mask.mask_localizer",
        "localizers.unet.unet_localizer",
        "localizers.markers.markers_localizer",
        "localizers.totalsegmentator.totalseg_localizer",
        "localizers.organs.organs",
    ),
    package="radspatial.agent",
)
register_localizer = LOCALIZERS.register  # decorator: @register_localizer("name")
list_localizers = LOCALIZERS.names


def create_localizer(name: str, **options: Any) -> Localizer:
    """``create_localizer("markers")``, ``create_localizer("unet", model_dir=...)``."""
    return LOCALIZERS.get(name)(**options)
