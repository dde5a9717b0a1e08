"""The modular agent: parse the question, localize the structures, verify the relation.

- ``pipeline/``: the steps every question takes, in order: ``parse`` (the question's type reads
  it) -> the type's ``to_locate`` -> locate (a localizer from ``types.LOCALIZERS``) -> the
  trust checks (``trust``; ``mirror`` for sides the image does not show) -> the type's
  ``verify``; ``agent`` runs them and records each in the answer's trace.
- ``localizers/<name>/``: what finds structures on the image (markers, organs, unet, mask,
  totalsegmentator), each registered by name.
- ``server/``: the OpenAI-compatible HTTP server; ``overlay``: the answer drawn on its image;
  ``job``: the ``radspatial agent`` / ``serve`` options.

The names below load on first use, so ``import radspatial.agent`` stays light.
"""

from radspatial.core.lazy import lazy_names

__all__ = [
    "Agent",
    "AgentAnswer",
    "create_localizer",
    "draw_overlay",
    "list_localizers",
    "load_image",
    "register_localizer",
    "verdict",
]
__getattr__ = lazy_names(
    "radspatial.agent",
    {
        "Agent": "radspatial.agent.pipeline.agent",
        "AgentAnswer": "radspatial.agent.pipeline.agent",
        "load_image": "radspatial.agent.pipeline.agent",
        "verdict": "radspatial.agent.pipeline.agent",
        "create_localizer": "radspatial.agent.pipeline.types",
        "list_localizers": "radspatial.agent.pipeline.types",
        "register_localizer": "radspatial.agent.pipeline.types",
        "draw_overlay": "radspatial.agent.overlay",
    },
)
