"""Runtime helpers every stage may use: per-key seeds, software versions, the bundled example."""

from __future__ import annotations

import hashlib
import platform
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from radspatial import __version__

if TYPE_CHECKING:
    import numpy as np

EXAMPLE_CT = "example_ct_sm.nii.gz"
EXAMPLE_SEG = "example_seg.nii.gz"


def keyed_rng(seed: int, key: str) -> np.random.Generator:
    """One generator per (seed, key): a rerun or a partial rerun draws the same numbers."""
    import numpy as np  # here: the CLI imports this module and starts without numpy

    digest = hashlib.sha256(key.encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def bundled_example() -> tuple[Path, Path]:
    """Paths of the bundled real CT and its TotalSegmentator mask (Apache-2.0)."""
    root = resources.files("radspatial.data")
    return Path(str(root / EXAMPLE_CT)), Path(str(root / EXAMPLE_SEG))


def software_versions() -> dict[str, str]:
    """Versions of everything that shapes the output, for provenance records."""
    import nibabel
    import numpy
    import PIL
    import pydicom
    import scipy

    return {
        "radspatial": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "nibabel": nibabel.__version__,
        "pydicom": pydicom.__version__,
        "pillow": PIL.__version__,
    }
