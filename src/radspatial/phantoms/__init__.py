"""Synthetic abdominal CT phantoms with TotalSegmentator-v2 masks, and counterfactual variants.

``make_phantom`` builds one phantom in memory; ``write_phantoms`` writes a folder of NIfTI
pairs plus ``cases.csv`` for ``radspatial generate --cases``. See docs/phantoms.md. The names
are imported on first use, so the command line can read ``phantoms/job`` (the ``phantom``
command's options) without numpy.
"""

from __future__ import annotations

from radspatial.core.lazy import lazy_names

_LAZY = {
    "VARIANTS": "radspatial.phantoms.build",
    "Phantom": "radspatial.phantoms.build",
    "make_phantom": "radspatial.phantoms.build",
    "write_phantoms": "radspatial.phantoms.io",
}
__all__ = ["VARIANTS", "Phantom", "make_phantom", "write_phantoms"]


__getattr__ = lazy_names("radspatial.phantoms", _LAZY)
