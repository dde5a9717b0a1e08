"""Suite-wide settings: run the test files on every core when pytest-xdist is installed, one
compute thread per process, and a working Ctrl-C for the CLIs the tests start.

``python -m pytest -q`` (the README's command) spreads the suite over up to four worker
processes, whole test files at a time (``--dist loadfile``), so a module's expensive fixtures (a
generated dataset, a trained tiny model) are built once, as in a serial run; datasets several
files use are built once per session (tests/shared_datasets.py). The files go out in the order
of tests/spread.py: the files that start a local Ray cluster first, as one unit (one worker runs
them one after the other), then the rest longest first. Ray files also hold a session-wide lock,
so two never run at the same time however the suite is spread (``-n N``, ``--dist load``), and
share one local Ray (``ray_session``): started by the first, stopped after the last of a run of
consecutive Ray files (a Ray start costs seconds quiet, far more on a busy machine).
``-n 0`` (or ``-p no:xdist``) runs serially; an explicit ``-n N`` is left as given;
``RADSPATIAL_TEST_WORKERS`` sets the default.

(Not ``--dist loadgroup`` with ``xdist_group`` marks: with pytest 9.2 and pytest-xdist 3.8 the
group never reaches the node ids, every test is scheduled alone, each worker built every module
fixture again, and two Ray files ran side by side.)
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import spread

# One compute thread per process (set before anything imports torch or numpy's BLAS; the CLIs
# the tests start inherit it): the workers already fill the cores, and small torch ops with two
# threads on a busy core ran 4-8x slower than with one (agent train's validation: 39 s vs 5 s).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

MAX_WORKERS = 4
RAY_FILES = set(spread.RAY_FILES)  # files that start (or join) a local Ray: one at a time
TESTS = Path(__file__).resolve().parent
RAY_CPUS = 3  # the shared local Ray's CPUs (its resources: what Ray places, not cores)


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
        config.option.dist = "loadfile"
        # in tests/spread.py's order (pytest_xdist_make_scheduler, below)
        config.option.radspatial_spread = True


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Whole files, the Ray files first as one unit, then the rest longest first (spread.py);
    only where the suite chose the spreading itself (an explicit ``-n``/``--dist`` is kept)."""
    if not getattr(config.option, "radspatial_spread", False):
        return None
    return spread.make_scheduler(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Give the processes the tests start a default Ctrl-C: a shell starts background jobs with
    SIGINT ignored, children inherit that, and the tests that interrupt a CLI would then hang."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module", autouse=True)
def one_ray_file_at_a_time(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Files in ``RAY_FILES`` hold a lock shared by every worker of the session for as long as
    their tests run (before their own module fixtures start Ray)."""
    if request.path.name not in RAY_FILES:
        yield
        return
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with (root / "ray.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


@pytest.fixture(scope="module")
def ray_session() -> Iterator[object]:
    """The local Ray of the Ray files: started here if none runs, kept for the next Ray file,
    stopped by :func:`pytest_runtest_teardown` after the last test of a run of Ray files. Its
    workers import the test modules (``PYTHONPATH``: a task may be a test's function). 3 CPUs:
    room for test_eval_ray.py's two shared replicas and one more a test starts beside them."""
    import ray

    if not ray.is_initialized():
        path = os.pathsep.join([str(TESTS), *sys.path])
        ray.init(
            num_cpus=RAY_CPUS,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            runtime_env={"env_vars": {"PYTHONPATH": path}},
        )
    yield ray


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the fixtures' teardown: stop the shared local Ray when the next test is not in a
    Ray file (or there is none)."""
    result = yield
    if "ray_session" in item.fixturenames and (
        nextitem is None or nextitem.path.name not in RAY_FILES
    ):
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    return result
