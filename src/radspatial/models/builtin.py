"""Imports every built-in backend module so their ``@register_backend`` decorators run.

Each module must keep heavy imports (torch, transformers, vllm) inside its functions.
"""
