"""What every figure shares: the palette, a headless matplotlib figure and its PNG bytes
(``figures.py`` and the consistency figure, ``consistency.py``)."""

from __future__ import annotations

import io
from typing import Any

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
DPI = 150


def new_figure(width: float, height: float) -> Any:
    """A matplotlib figure (inches) on the Agg canvas: no display, no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return buf.getvalue()
