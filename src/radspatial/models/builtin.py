"""Imports every built-in backend module so their ``@register_backend`` decorators run.

Each module must keep heavy imports (torch, transformers, vllm) inside its functions.
One import line per backend module, so a new backend is one appended line.
"""

# ruff: noqa: I001, F401
from radspatial.models import openai_compat
from radspatial.models import hf
from radspatial.models import vllm_backend
from radspatial.models import baselines
from radspatial.models import agent_backend
