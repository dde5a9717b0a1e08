"""Imports every built-in localizer module so their ``@register_localizer`` decorators run.

One import line per module (append yours); heavy imports (torch, monai) stay inside functions.
"""

# ruff: noqa: I001, F401
from radspatial.agent import mask_localizer
from radspatial.agent import unet
from radspatial.agent import markers_localizer
from radspatial.agent import totalseg_localizer
from radspatial.agent import organs
