"""Synthetic abdominal CT phantoms with TotalSegmentator-v2 masks, and counterfactual variants.

``make_phantom`` builds one phantom in memory; ``write_phantoms`` writes a folder of NIfTI
pairs plus ``cases.csv`` for ``radspatial generate --cases``. See docs/phantoms.md.
"""

from radspatial.phantoms.build import VARIANTS, Phantom, make_phantom
from radspatial.phantoms.io import write_phantoms

__all__ = ["VARIANTS", "Phantom", "make_phantom", "write_phantoms"]
