"""Suite-wide settings: run the test files on every core when pytest-xdist is installed, and
give the CLIs the tests start a working Ctrl-C.

``python -m pytest -q`` (the README's command) spreads the suite over up to four worker
processes, one test file per worker at a time, so a module's expensive fixtures (a generated
dataset, a trained tiny model) are built once, as in a serial run. Files that start a local Ray
cluster share one group and so never run at the same time. ``-n 0`` (or ``-p no:xdist``) runs
serially; an explicit ``-n N`` is left as given; ``RADSPATIAL_TEST_WORKERS`` sets the default.
"""

from __future__ import annotations

import os
import signal

import pytest

MAX_WORKERS = 4
# test files whose tests start (or join) a local Ray cluster: one at a time
RAY_FILES = {"test_eval_ray.py", "test_generate_ray.py", "test_ray_data_vllm.py"}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _one_file(args: list[str]) -> bool:
    """True when the command line names tests of a single file (nothing to spread)."""
    files = {arg.split("::")[0] for arg in args}
    return len(files) == 1 and next(iter(files)).endswith(".py")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Default to one worker per core (at most four) unless ``-n`` was given."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not hasattr(config.option, "numprocesses"):
        return  # inside a worker, or xdist not installed / disabled
    if config.option.numprocesses is not None or config.getoption("collectonly"):
        return
    if config.getoption("usepdb", False) or _one_file(config.args):
        return
    workers = int(os.environ.get("RADSPATIAL_TEST_WORKERS", min(MAX_WORKERS, _cores())))
    if workers > 1:
        config.option.numprocesses = workers
        config.option.dist = "loadgroup"


def pytest_configure(config: pytest.Config) -> None:
    """Give the processes the tests start a default Ctrl-C: a shell starts background jobs with
    SIGINT ignored, children inherit that, and the tests that interrupt a CLI would then hang."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One xdist group per test file (Ray files share one), so fixtures are built once."""
    for item in items:
        name = item.path.name
        group = "ray" if name in RAY_FILES else name
        item.add_marker(pytest.mark.xdist_group(group))
