"""The order in which pytest-xdist hands whole test files to the workers (tests/conftest.py).

xdist's ``--dist loadfile`` makes one work unit per file and hands the units out largest first by
*number of tests*: the 212 quick architecture checks went first and the few, slow Ray tests last,
where the two Ray files then ran one after the other (they share a lock) while the other worker
had nothing left to do: the last ~10 of 31.5 minutes under load. Here:

- the files that start a local Ray cluster (``RAY_FILES``) are **one** work unit, handed out
  **first**: one worker runs them one after the other on one shared local Ray (started once:
  ``ray_session`` in tests/conftest.py; never two Ray clusters at once, and no worker waits on
  the Ray lock) while the other works through the rest;
- the other files go longest first by their measured cost (:data:`FILE_SECONDS`, busy seconds
  in a measured run; files not listed count :data:`SECONDS_PER_TEST` per test), so the last
  files handed out are short ones and both workers finish close together.

The order only changes which worker runs a file when; every file still runs whole in one worker
(its module fixtures built once).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

# test files whose tests start (or join) a local Ray cluster: one work unit, one at a time
# (test_ray_data_vllm.py starts none: without vLLM its backend stops before Ray is started)
RAY_FILES = ("test_eval_ray.py", "test_generate_ray.py")
RAY_UNIT = "tests/(the files that start Ray)"

# Busy seconds (setup + call + teardown, from ``--durations=0``) of the files over 20 s in one run
# of the whole suite (README command, 2 workers, three busy loops beside it plus other sessions:
# load 4-17, median 9; 28.8 min; the Ray files excluded: they go first anyway, 20 of those
# minutes). Only their order matters; re-measure when a file grows or shrinks a lot.
FILE_SECONDS = {
    "test_organs_synth.py": 31,  # issue 50: the body hull by distance transforms (was 307)
    "test_researcher_ux.py": 215,
    "test_cli_ux.py": 177,
    "test_generate_hardening.py": 138,
    "test_mirp.py": 120,
    "test_agent_unet_torch.py": 63,
    "test_inspect.py": 58,
    "test_agent_markers.py": 54,
    "test_types.py": 53,
    "test_cli.py": 53,
    "test_report.py": 51,
    "test_open_questions.py": 47,
    "test_agent_organs.py": 40,
    "test_agent_marker_sizes.py": 35,
    "test_generate_kill.py": 35,
    "test_ux_round4.py": 35,
    "test_eval_hardening.py": 31,
    "test_spar_vqa.py": 31,
    "test_python_api.py": 30,
    "test_agent_server.py": 28,
    "test_architecture.py": 23,
    "test_marker_prompts.py": 23,
    "test_eval_kill.py": 23,
    "test_question_plugin.py": 21,
}
SECONDS_PER_TEST = 0.5  # a file not listed above (most tests take well under a second)


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file, or :data:`RAY_UNIT` for the Ray files."""
    path = nodeid.split("::", 1)[0]
    return RAY_UNIT if PurePosixPath(path).name in RAY_FILES else path


def cost(unit: str, n_tests: int) -> float:
    """Estimated seconds of a work unit of ``n_tests`` tests (the Ray unit: infinite)."""
    if unit == RAY_UNIT:
        return float("inf")
    name = PurePosixPath(unit).name
    return float(FILE_SECONDS.get(name, n_tests * SECONDS_PER_TEST))


def order(units: Iterable[tuple[str, int]]) -> list[str]:
    """Work units ``(name, number of tests)`` in the order they are handed out: the Ray unit
    first, then by :func:`cost`, longest first (ties: as collected)."""
    units = list(units)
    ranked = sorted(range(len(units)), key=lambda i: (-cost(*units[i]), i))
    return [units[i][0] for i in ranked]


def make_scheduler(config, log):
    """xdist's file scheduling with :func:`unit_of` as the unit and :func:`order` as the order
    (built on ``LoadFileScheduling``: pytest-xdist 3.x)."""
    from xdist.scheduler import LoadFileScheduling

    class RayFirstFileScheduling(LoadFileScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the first assignment: the queue is complete, reorder it
                self._ordered = True
                queue = dict(self.workqueue)
                self.workqueue.clear()
                for unit in order((u, len(tests)) for u, tests in queue.items()):
                    self.workqueue[unit] = queue[unit]
            super()._assign_work_unit(node)

    return RayFirstFileScheduling(config, log)
