"""SPAR probes: what vision encoders know about space (docs/probes.md).

``build_probes`` writes probe datasets from CT cases; ``load_probe_task`` and ``probe_info`` read
them back (the trainer needs only those two).
"""

from radspatial.probes.build import build_probes
from radspatial.probes.data import ProbeSample, TaskInfo, load_probe_task, probe_info
from radspatial.probes.tasks import TASK_NAMES

__all__ = ["TASK_NAMES", "ProbeSample", "TaskInfo", "build_probes", "load_probe_task", "probe_info"]
