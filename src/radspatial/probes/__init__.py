"""SPAR probes: what vision encoders know about space (docs/probes.md).

``build_probes`` writes probe datasets from CT cases; ``load_probe_task`` and ``probe_info`` read
them back (the trainer needs only those two). The names are imported on first use, so the
command line can read ``probes/job`` (the probe commands' options) without numpy.
"""

from __future__ import annotations

from radspatial.core.lazy import lazy_names

_LAZY = {
    "build_probes": "radspatial.probes.build",
    "ProbeSample": "radspatial.probes.data",
    "TaskInfo": "radspatial.probes.data",
    "load_probe_task": "radspatial.probes.data",
    "probe_info": "radspatial.probes.data",
    "TASK_NAMES": "radspatial.probes.tasks",
}
__all__ = ["TASK_NAMES", "ProbeSample", "TaskInfo", "build_probes", "load_probe_task", "probe_info"]


__getattr__ = lazy_names("radspatial.probes", _LAZY)
