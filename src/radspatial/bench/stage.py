"""Resumable generation: one shard per case in the staging folder, written atomically.

``OUT.partial/`` holds::

    .lock                        flock held by the running command (a second one is refused)
    shards/<case_id>/            a finished case: its images in the dataset layout, rows.jsonl
                                 (its manifest rows, sorted by id) and done.json (the key of
                                 what made it); built in a temporary folder and renamed in, so
                                 a shard folder is either complete or absent
    shards/.tmp-<case_id>-<pid>  a case in progress (removed on the next start)
    dataset/                     assembled from the shards at the end, then renamed to OUT

A rerun of the same command reuses every shard whose key (config, case, input file sizes and
times, radspatial version) matches and recomputes the rest, so it ends with the dataset an
uninterrupted run writes. A failing case is a value (:class:`CaseFailure`), not an exception:
with ``on_error="skip"`` it is recorded and the run goes on; otherwise the run stops with the
finished shards kept for the rerun.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from radspatial import __version__
from radspatial.bench.case import generate_case
from radspatial.bench.config import GenerateConfig
from radspatial.core.errors import disk_error_line
from radspatial.core.executor import TaskFailed, run_ordered
from radspatial.core.io import atomic_write_json, dumps
from radspatial.core.locks import folder_lock
from radspatial.imaging.volumes import Case, InputError

SHARDS, ASSEMBLY, ROWS, DONE, LOCK = "shards", "dataset", "rows.jsonl", "done.json", ".lock"
CENTRES = "centres.jsonl"  # the case's entries of MIRP's standard-view centres file
ON_ERROR = ("stop", "skip")
LOCK_WAIT_S = 10.0
# errors of the output disk, not of one case: stop at once, never retried or skipped
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


@dataclass(frozen=True)
class CaseFailure:
    """A case that could not be generated: bad input, or (``fatal``) the output disk."""

    case_id: str
    reason: str  # one line naming the file and the problem
    fatal: bool = False


@dataclass(frozen=True)
class ShardDone:
    """A finished case's shard (its rows stay on disk)."""

    case_id: str
    info: dict  # source provenance + n_slices, n_selected
    n_rows: int
    resumed: bool = False


@dataclass(frozen=True)
class ShardJob:
    case: Case
    config: GenerateConfig
    shards: Path
    key: str


def _stat_key(path: Path) -> list:
    try:
        if path.is_dir():
            return sorted(
                (str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                for p in path.rglob("*")
                if p.is_file()
            )
        st = path.stat()
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return ["missing"]


def case_key(case: Case, config: GenerateConfig) -> str:
    """What determines a case's shard: a changed input file or option recomputes it."""
    record = {
        "version": __version__,
        "config": config.to_json(),
        "case": [case.case_id, str(case.ct), str(case.seg), case.labels, case.variant],
        "inputs": [_stat_key(case.ct), _stat_key(case.seg)],
    }
    return hashlib.sha256(dumps(record).encode()).hexdigest()


def shard_task(job: ShardJob) -> ShardDone | CaseFailure:
    """Generate one case into its shard (any executor); bad input comes back as a value."""
    case = job.case
    tmp = job.shards / f".tmp-{case.case_id}-{os.getpid()}"
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        out = generate_case(case, job.config, tmp)
        rows = sorted(out.rows, key=lambda r: r.id)
        text = "".join(
            json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False) + "\n" for r in rows
        )
        (tmp / ROWS).write_text(text, encoding="utf-8")
        centres = sorted(out.centres, key=lambda c: c["filename"])
        text = "".join(json.dumps(c, sort_keys=True) + "\n" for c in centres)
        (tmp / CENTRES).write_text(text, encoding="utf-8")
        info = {
            **out.source,
            "modality": job.config.modality,
            "n_slices": out.n_slices,
            "n_selected": out.n_selected,
        }
        atomic_write_json(tmp / DONE, {"key": job.key, "info": info, "n_rows": len(rows)})
        final = job.shards / case.case_id
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        return ShardDone(case.case_id, info, len(rows))
    except InputError as exc:
        return CaseFailure(case.case_id, " ".join(str(exc).split()))
    except ValueError as exc:  # named by the CT unless the message names its file already
        line = " ".join(str(exc).split())
        return CaseFailure(
            case.case_id, line if line.startswith(f"{case.ct}:") else f"{case.ct}: {line}"
        )
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            return CaseFailure(case.case_id, disk_error_line(exc, job.shards), fatal=True)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_done(shard: Path) -> dict | None:
    try:
        done = json.loads((shard / DONE).read_text())
        return done if isinstance(done, dict) and (shard / ROWS).is_file() else None
    except (OSError, ValueError):
        return None


@contextmanager
def locked_stage(stage: Path) -> Iterator[Path]:
    """Create/reuse ``stage`` and hold its lock (``core/locks``); a second writer gets a clear
    error after ``LOCK_WAIT_S`` (workers of a killed run exit just after it)."""

    def busy(holder: str) -> InputError:
        return InputError(
            f"{stage}: another radspatial generate is writing this output; wait for it"
        )

    try:
        stage.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(disk_error_line(exc, stage)) from None
    with folder_lock(stage / LOCK, busy, wait_s=LOCK_WAIT_S):
        (stage / SHARDS).mkdir(exist_ok=True)
        for p in (stage / SHARDS).glob(".tmp-*"):  # cases a killed run left unfinished
            shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(stage / ASSEMBLY, ignore_errors=True)
        yield stage


def run_shards(
    cases: Sequence[Case],
    config: GenerateConfig,
    stage: Path,
    *,
    workers: int,
    executor: str,
    address: str | None,
    on_error: str,
    progress: Callable[[int], None] = lambda n: None,
    log: Callable[[str], None] = print,
) -> list[ShardDone | CaseFailure]:
    """Every case's shard, reusing finished ones; in case order."""
    shards = stage / SHARDS
    results: list[ShardDone | CaseFailure | None] = [None] * len(cases)
    todo: list[tuple[int, ShardJob]] = []
    for i, case in enumerate(cases):
        key = case_key(case, config)
        done = read_done(shards / case.case_id)
        if done is not None and done.get("key") == key:
            results[i] = ShardDone(case.case_id, done["info"], done["n_rows"], resumed=True)
        else:
            shutil.rmtree(shards / case.case_id, ignore_errors=True)
            todo.append((i, ShardJob(case, config, shards, key)))
    if len(todo) < len(cases):
        log(f"resuming: {len(cases) - len(todo)} of {len(cases)} case(s) already done in {stage}")
    progress(len(cases) - len(todo))
    jobs = [job for _, job in todo]
    for j, result in run_ordered(
        shard_task, jobs, workers=workers, executor=executor, address=address
    ):
        i, case = todo[j][0], jobs[j].case
        if isinstance(result, TaskFailed):
            result = CaseFailure(
                case.case_id,
                f"{case.ct}: case {case.case_id} failed {result.attempts} times: {result.message}",
            )
        if isinstance(result, CaseFailure):
            if result.fatal or on_error != "skip":
                raise InputError(result.reason)
            log(f"skipped case {case.case_id}: {result.reason}")
        results[i] = result
        progress(1)
    return [r for r in results if r is not None]


def link_tree(src: Path, dst: Path, skip: set[str]) -> None:
    """Hard-link every file under ``src`` into ``dst`` (copy where links are not possible)."""
    for root, _, files in os.walk(src):
        rel = Path(root).relative_to(src)
        if rel == Path("."):
            files = [f for f in files if f not in skip]
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            target = dst / rel / name
            try:
                os.link(Path(root) / name, target)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                    raise
                shutil.copyfile(Path(root) / name, target)


def own_table(dst: Path, info: dict) -> dict:
    """A case read with a label table file gets a copy in ``labels/`` and names it there
    (relative): eval reads tables only from inside the dataset, and no host path is recorded."""
    from radspatial.core.labels import BUILTIN_TABLES

    table = info.get("labels")
    if not table or table in BUILTIN_TABLES or not Path(table).is_file():
        return info
    rel = f"labels/{Path(table).name}"
    (dst / "labels").mkdir(exist_ok=True)
    shutil.copyfile(table, dst / rel)
    return {**info, "labels": rel}
