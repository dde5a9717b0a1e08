"""Imports every built-in backend module so their ``@register_backend`` decorators run.

Each module must keep heavy imports (torch, transformers, vllm) inside its functions.
"""

from radspatial.models import openai_compat  # noqa: F401
from radspatial.models import hf  # noqa: F401
from radspatial.models import vllm_backend  # noqa: F401
# ruff: noqa: I001 - one import line per backend module, so engineers can append without merging
