"""radspatial: spatial-reasoning benchmarks, evaluation, agents and probes for CT."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "parse_answer"]


def __getattr__(name: str):
    # Lazy so `import radspatial` stays instant.
    if name == "parse_answer":
        from radspatial.scoring import parse_answer

        return parse_answer
    raise AttributeError(name)
