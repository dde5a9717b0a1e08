"""Run one function over many items, in-process, in a local process pool, or on Ray.

``run_ordered(fn, items, ...)`` yields ``(index, result)`` in item order whatever order the
tasks finish in, so whoever writes the results writes the same bytes on every executor. A task
that raises, or whose worker dies, is retried up to ``retries`` times; a task that still fails
yields a :class:`TaskFailed` in its place. Expected failures (bad input) should be returned by
``fn`` as values, not raised, so they are not retried.

Local workers die with their parent (``PR_SET_PDEATHSIG`` on Linux, and a thread that watches
the parent pid elsewhere), so kill -9 of the parent never leaves workers writing on. Ray is
imported only when ``executor="ray"`` (``pip install 'radspatial[ray]'``); ``address`` (or
``RAY_ADDRESS``) joins a cluster, otherwise a local Ray is started for the run and stopped after.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from radspatial.core.jobspec import ParamError
from radspatial.core.progress import Progress

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Spread:
    """Where the tasks of one :func:`run_all` run: ``workers`` processes (or Ray CPUs) of
    ``executor`` (one of ``EXECUTORS``); ``address``: the Ray cluster to join (None:
    ``RAY_ADDRESS``, else a local Ray). Checked where the tasks start (``check_workers``)."""

    workers: int = 1
    executor: str = "local"
    address: str | None = None


@dataclass(frozen=True)
class TaskFailed:
    """A task that raised (or lost its worker) on every attempt."""

    index: int
    attempts: int
    message: str


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: end this worker when ``parent_pid`` ends (kill -9 included)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    # SIGINT goes to the whole process group on Ctrl-C: the parent alone decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:  # where PDEATHSIG does not exist, or the pid was reparented
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="radspatial-parent-watch").start()


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt (the command line exits 143 for it, 130 for Ctrl-C)."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` in the main thread: the same cleanup as
    Ctrl-C. The one handler of every command (generate, eval, phantom, staged exports)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_workers(workers: int, executor: str) -> None:
    if not isinstance(workers, int) or workers < 1:
        raise ParamError("workers", f"{{param}} must be >= 1, got {workers}")
    if executor not in EXECUTORS:
        known = ", ".join(EXECUTORS)
        raise ParamError("executor", f"{{param}} must be one of {known}, got {executor!r}")


def run_ordered(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    *,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    retries: int = 2,
) -> Iterator[tuple[int, Any]]:
    """``(index, fn(items[index]) or TaskFailed)`` for every item, in index order."""
    check_workers(workers, executor)
    if executor == "ray":
        yield from _run_ray(fn, items, workers, address, retries)
    elif workers == 1 or len(items) <= 1:
        for i, item in enumerate(items):
            yield i, _run_inline(fn, item, i, retries)
    else:
        yield from _in_order(_run_pool(fn, items, workers, retries))


def run_all(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    *,
    desc: str,
    failed: Callable[[int, str], str],
    progress: bool = True,
    spread: Spread = Spread(),
) -> list[Any]:
    """``[fn(item) for item in items]`` through :func:`run_ordered`, spread as ``spread`` says
    and counted on a progress bar (``desc``, one unit a case). A ``ValueError`` that ``fn``
    returns (bad input, not retried) is raised as is; a task that failed on every attempt raises
    ``ValueError(failed(index, message))``."""
    bar = Progress(len(items), desc, "case", enabled=progress)
    out: list[Any] = []
    try:
        done = run_ordered(
            fn, items, workers=spread.workers, executor=spread.executor, address=spread.address
        )
        for i, result in done:
            if isinstance(result, ValueError):
                raise result
            if isinstance(result, TaskFailed):
                raise ValueError(failed(i, result.message))
            out.append(result)
            bar.update()
    finally:
        bar.close()
    return out


def _run_inline(fn: Callable[[Any], Any], item: Any, index: int, retries: int) -> Any:
    for attempt in range(1, retries + 2):
        try:
            return fn(item)
        except Exception as exc:
            if attempt > retries:
                return TaskFailed(index, attempt, _one_line(exc))
    raise AssertionError("unreachable")


def _in_order(done: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """Reorder (index, result) pairs arriving in any order into index order."""
    waiting: dict[int, Any] = {}
    nxt = 0
    for i, result in done:
        waiting[i] = result
        while nxt in waiting:
            yield nxt, waiting.pop(nxt)
            nxt += 1


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: running tasks are killed, not awaited."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=5)


def _run_pool(
    fn: Callable[[Any], Any], items: Sequence[Any], workers: int, retries: int
) -> Iterator[tuple[int, Any]]:
    """(index, result) as tasks finish; a broken pool (a worker died) is rebuilt."""
    attempts = [0] * len(items)
    todo = list(range(len(items)))
    while todo:
        pool = ProcessPoolExecutor(
            max_workers=min(workers, len(todo)),
            initializer=die_with_parent,
            initargs=(os.getpid(),),
        )
        try:
            futures: dict[Future, int] = {}
            for i in todo:
                futures[pool.submit(fn, items[i])] = i
                attempts[i] += 1
            todo = []
            while futures:
                finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                broken = False
                for fut in finished:
                    i = futures.pop(fut)
                    try:
                        yield i, fut.result()
                    except BrokenProcessPool:
                        broken = True
                        todo.append(i)
                    except Exception as exc:
                        if attempts[i] > retries:
                            yield i, TaskFailed(i, attempts[i], _one_line(exc))
                        else:
                            futures[pool.submit(fn, items[i])] = i
                            attempts[i] += 1
                if broken:  # every pending future of a broken pool fails: resubmit them all
                    todo += list(futures.values())
                    futures.clear()
            for i in sorted(todo):
                if attempts[i] > retries:
                    todo.remove(i)
                    yield i, TaskFailed(i, attempts[i], "worker process died")
            todo.sort()
        finally:
            _kill_pool(pool)


def _run_ray(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    workers: int,
    address: str | None,
    retries: int,
) -> Iterator[tuple[int, Any]]:
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'radspatial[ray]'") from None
    started = ensure_ray(ray, address, workers)
    try:
        remote = ray.remote(max_retries=retries, retry_exceptions=True, num_cpus=1)(fn)
        refs = {remote.remote(item): i for i, item in enumerate(items)}
        yield from _in_order(_ray_results(ray, refs, retries))
    finally:
        if started:
            ray.shutdown()


def ensure_ray(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Join ``address`` / ``RAY_ADDRESS``, or start a local Ray with ``num_cpus`` (default: all);
    True when this call started it (and so should shut it down)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
    }
    if address is None:
        options["num_cpus"] = num_cpus or os.cpu_count() or 1
    ray.init(address=address, **options)
    return True


def _ray_results(ray, refs: dict, retries: int) -> Iterator[tuple[int, Any]]:
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = refs[ref]
                try:
                    yield i, ray.get(ref)
                except ray.exceptions.RayError as exc:
                    cause = getattr(exc, "cause", None) or exc
                    yield i, TaskFailed(i, retries + 1, _one_line(cause))
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
