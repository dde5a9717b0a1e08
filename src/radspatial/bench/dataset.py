"""The on-disk benchmark, staged in ``OUT.partial/`` and renamed to ``OUT`` once complete: MIRP
JSON, manifest.jsonl, and ``dataset.json`` last (a folder without it is never finished)."""

from __future__ import annotations

import heapq
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radspatial.bench.ablation import generate_ablation
from radspatial.bench.config import GenerateConfig
from radspatial.bench.generate import encode_png, image_relpath
from radspatial.bench.mirp import MIRP_CENTRES, MirpStreams
from radspatial.bench.stage import (
    ASSEMBLY,
    CENTRES,
    DISK_ERRNOS,
    DONE,
    ON_ERROR,
    ROWS,
    SHARDS,
    ShardDone,
    link_tree,
    locked_stage,
    own_table,
    run_shards,
)
from radspatial.core.errors import disk_error_line
from radspatial.core.executor import check_workers, sigterm_as_interrupt
from radspatial.core.io import atomic_write_json, atomic_write_jsonl
from radspatial.core.jobspec import ParamError
from radspatial.core.modality import recorded_modality
from radspatial.core.progress import Progress, steps_to
from radspatial.core.runtime import keyed_rng, software_versions
from radspatial.core.safepath import check_disjoint
from radspatial.core.staging import check_made_by, check_out_folder, swap_in
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.imaging.volumes import Case, InputError
from radspatial.questions import get_question_type
from radspatial.questions.decidability import MARKERS_ONLY
from radspatial.questions.manifest import ManifestRow, ObjectRow

FORMAT = "radspatial-dataset"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class DatasetSummary:
    out: Path
    n_questions: int
    counts: dict[str, dict[str, int]]  # "rq2/dots" -> {"n", "yes"}
    question_types: dict[str, dict]  # "size" -> {"n", "yes", "chance"}
    cases: list[dict]
    failures: list[dict] = field(default_factory=list)  # cases skipped with on_error="skip"
    decidability: dict = field(default_factory=dict)  # dataset.json's block


def writes_ablation(config: GenerateConfig) -> bool:
    """Whether the blank-image ablation (AS) is written: its items are MIRP's relative-position
    questions on a blank image, so only when relative position is asked (``--questions
    laterality`` alone writes none)."""
    asked = any(get_question_type(n).mirp_type for n in config.question_types)
    return "as" in config.setups and config.as_count > 0 and asked


def _ablation_rows(config: GenerateConfig, stage: Path) -> list[ManifestRow]:
    rng = keyed_rng(config.seed, "__ablation__")
    rows = []
    for k, marker, img, fields in generate_ablation(
        rng, config.as_count, config.markers, config.size, config.rules
    ):
        rel = image_relpath("as", marker, f"image_{k + 1}.png")
        path = stage / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_png(img, config.png_level))
        row_id = f"as/{marker}/image_{k + 1}/q0"
        o1, o2 = (ObjectRow.from_json(fields[o], f"{row_id}: {o}") for o in ("object1", "object2"))
        rows.append(
            ManifestRow(
                id=row_id,
                setup="as",
                marker=marker,
                image=rel,
                question=fields["question"],
                answer=fields["answer"],
                answer_standard=None,  # blank: no view to undo, no patient
                answer_anatomical=None,
                relation=fields["relation"],
                variant="blank",
                modality=recorded_modality(config.modality),
                object1=o1,
                object2=o2,
                decidable=True,  # the markers' positions are all there is to read
                decidable_reason=MARKERS_ONLY,
            )
        )
    return rows


def build_dataset(
    cases: Sequence[Case],
    config: GenerateConfig,
    out: Path,
    *,
    workers: int = 1,
    overwrite: bool = False,
    executor: str = "local",
    address: str | None = None,
    on_error: str = "stop",
    log: Callable[[str], None] = print,
) -> DatasetSummary:
    """Generate the benchmark for ``cases`` into ``out`` (atomically, see module docstring).

    Each case is a shard in ``OUT.partial/shards`` (``bench/stage.py``): rerunning an interrupted
    or failed command reuses the finished cases. ``executor`` is "local" (``workers``
    processes) or "ray" (``address`` or RAY_ADDRESS, else a local Ray with ``workers`` CPUs);
    the bytes written are the same. ``on_error="skip"`` records failing cases in
    ``failures.jsonl`` and ``dataset.json`` instead of stopping.
    """
    check_workers(workers, executor)
    if on_error not in ON_ERROR:
        known = ", ".join(ON_ERROR)
        raise ParamError("on_error", f"{{param}} must be one of {known}, got {on_error!r}")
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate case ids: {', '.join(dup)}")
    if not cases:
        raise ValueError("no cases")
    out = Path(out)
    inputs = {f"{c.case_id} {k}": p for c in cases for k, p in (("ct", c.ct), ("seg", c.seg))}
    check_disjoint(out, inputs)  # --overwrite replaces out whole: no input may lie inside
    check_out_folder(out, overwrite)
    if overwrite:  # --overwrite replaces a dataset, never another folder
        check_made_by(out, "dataset.json", "a radspatial dataset")
    stage = out.with_name(out.name + ".partial")
    if stage.is_symlink() or (stage.exists() and not stage.is_dir()):
        raise InputError(f"{stage}: staging path exists and is not a folder; remove it")
    try:
        with locked_stage(stage), sigterm_as_interrupt():
            try:
                run = {"workers": workers, "executor": executor, "address": address}
                summary = _build(cases, config, stage, out, **run, on_error=on_error, log=log)
            except BaseException:
                shutil.rmtree(stage / ASSEMBLY, ignore_errors=True)
                if not any(p.is_dir() for p in (stage / SHARDS).glob("[!.]*")):
                    shutil.rmtree(stage, ignore_errors=True)  # nothing worth resuming
                raise
            swap_in(stage / ASSEMBLY, out)
        shutil.rmtree(stage, ignore_errors=True)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise InputError(disk_error_line(exc, out)) from None
        raise
    return summary


def _build(
    cases: Sequence[Case], config: GenerateConfig, stage: Path, out: Path, **run: Any
) -> DatasetSummary:
    """Every case's shard (``run``: :func:`run_shards`' keywords), then the dataset folder
    assembled from them in ``stage``; the summary names ``out``, where it will be swapped in."""
    bar = Progress(len(cases), "generate", "case")
    try:
        with steps_to(bar):
            results = run_shards(cases, config, stage, progress=bar.update, **run)
            bar.set_note("writing the blank (AS) images, the manifest and the MIRP files")
            return _assemble(stage, results, config, out)
    finally:
        bar.close()


def _allow_open_files(n: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def _shard_lines(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _shard_rows(path: Path) -> Iterator[ManifestRow]:
    for n, row in enumerate(_shard_lines(path), 1):
        yield ManifestRow.from_json(row, f"{path}: line {n}")


def _write_centres(path: Path, shard_files: list[Path]) -> None:
    """MIRP's centres file (a JSON list, one entry per RQ1 image), streamed from the shards in
    file-name order; not written when no case has a slice with questions."""
    streams = [_shard_lines(f) for f in shard_files if f.is_file()]
    first = True
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[")
        for entry in heapq.merge(*streams, key=lambda e: e["filename"]):
            fh.write(("\n" if first else ",\n") + json.dumps(entry, sort_keys=True))
            first = False
        fh.write("\n]\n")
    if first:
        path.unlink()


class _Chance:
    """Each type's chance level; where it depends on the item (identification: one of the
    structures in the slice), the mean over the type's items, accumulated row by row."""

    def __init__(self) -> None:
        self.sums: dict[str, list[float]] = {}

    def add(self, row: ManifestRow) -> None:
        qtype = get_question_type(row.question_type)
        if qtype.chance is None and (chance := qtype.item_chance(row.params or {})) is not None:
            acc = self.sums.setdefault(qtype.name, [0.0, 0])
            acc[0] += chance
            acc[1] += 1

    def of(self, name: str) -> float | None:
        if name in self.sums:
            total, n = self.sums[name]
            return round(total / n, 6) if n else None
        return get_question_type(name).chance


@dataclass
class _Tally:
    """What dataset.json counts, accumulated row by row while the manifest is written."""

    counts: dict[str, dict] = field(default_factory=dict)  # "rq2/dots" -> {"n", "yes"}
    by_type: dict[str, dict] = field(default_factory=dict)  # "size" -> {"n", "yes"}
    variants: Counter = field(default_factory=Counter)  # rq1 transforms
    planes: dict = field(default_factory=lambda: defaultdict(Counter))  # "coronal" -> counts
    chance: _Chance = field(default_factory=_Chance)
    decided: dict[str, dict] = field(default_factory=dict)  # "rq1/none" -> decidable counts
    reasons: Counter = field(default_factory=Counter)  # rq1: why (decidable or not)
    n_rows: int = 0

    def add(self, row: ManifestRow) -> None:
        self.n_rows += 1
        for key, table in (
            (f"{row.setup}/{row.marker}", self.counts),
            (row.question_type, self.by_type),
        ):
            c = table.setdefault(key, {"n": 0, "yes": 0})
            c["n"] += 1
            get_question_type(row.question_type).tally(c, row.answer)  # yeses, or classes
        self.chance.add(row)
        if row.setup != "as":  # groups: one per RQ1 B1 item of a group
            start = row.setup == "rq1" and row.transform == "B1"
            self.planes[row.plane or DEFAULT_PLANE].update(
                n=1, rq1=row.setup == "rq1", groups=start
            )
        if row.setup == "rq1":
            self.variants[row.transform] += 1
            self.reasons[(row.decidable_reason or "unknown").split(":")[0]] += 1
        self._decided(row)

    def _decided(self, row: ManifestRow) -> None:
        """Decidable items per setup/marker and, for yes/no types, their yeses (is the
        decidable subset still balanced?)."""
        c = self.decided.setdefault(
            f"{row.setup}/{row.marker}", {"n": 0, "decidable": 0, "undecidable": 0, "unknown": 0}
        )
        c["n"] += 1
        c[{True: "decidable", False: "undecidable", None: "unknown"}[row.decidable]] += 1
        if row.decidable:
            get_question_type(row.question_type).tally_decidable(c, row.answer)

    def decidability(self, config: GenerateConfig) -> dict:
        """dataset.json's ``decidability`` block (docs/benchmark_validity.md)."""
        by_setup = {}
        for key, c in sorted(self.decided.items()):
            c = dict(c)
            if "decidable_yes" in c:
                c["decidable_balanced"] = 2 * c["decidable_yes"] == c["decidable"]
            by_setup[key] = c
        return {
            "mode": config.decidable,
            "landmarks": _landmark_table_name(config),
            "by_setup": by_setup,
            "rq1_reasons": dict(sorted(self.reasons.items())),
        }


def _landmark_table_name(config: GenerateConfig) -> str:
    from radspatial.questions.decidability import landmark_table

    return landmark_table(config.landmarks).name


def _write_manifest(dst: Path, streams: list[Iterator[ManifestRow]]) -> _Tally:
    """manifest.jsonl and MIRP's qa*.json from the rows merged in id order; their counts."""
    tally = _Tally()
    mirp = MirpStreams(dst)
    with (dst / "manifest.jsonl").open("w", encoding="utf-8") as fh:
        for row in heapq.merge(*streams, key=lambda r: r.id):
            fh.write(json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) + "\n")
            mirp.add(row)
            tally.add(row)
    mirp.close()
    return tally


def _assemble(stage: Path, results: list, config: GenerateConfig, out: Path) -> DatasetSummary:
    """The dataset folder from the shards, rows streamed from disk and merged in id order."""
    dst = stage / ASSEMBLY
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    done = [r for r in results if isinstance(r, ShardDone)]
    failures = [
        {"case_id": r.case_id, "reason": r.reason} for r in results if not isinstance(r, ShardDone)
    ]
    for r in done:
        link_tree(stage / SHARDS / r.case_id, dst, skip={ROWS, DONE, CENTRES})
    _write_centres(dst / MIRP_CENTRES, [stage / SHARDS / r.case_id / CENTRES for r in done])
    _allow_open_files(len(done) + 64)  # the merge holds every shard's rows file open
    streams = [_shard_rows(stage / SHARDS / r.case_id / ROWS) for r in done]
    if writes_ablation(config):
        streams.append(iter(sorted(_ablation_rows(config, dst), key=lambda r: r.id)))
    tally = _write_manifest(dst, streams)
    if failures:
        atomic_write_jsonl(dst / "failures.jsonl", failures)
    case_info = [own_table(dst, r.info) for r in done]
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": config.to_json(),
        "seed": config.seed,
        "n_questions": tally.n_rows,
        "counts": dict(sorted(tally.counts.items())),
        "question_types": {
            name: {**tally.by_type[name], "chance": tally.chance.of(name)}
            for name in sorted(tally.by_type)
        },
        "rq1_transforms": dict(sorted(tally.variants.items())),
        "planes": {p: dict(c) for p, c in sorted(tally.planes.items())},
        "decidability": tally.decidability(config),
        "cases": case_info,
        "failures": failures,
        "versions": software_versions(),
    }
    atomic_write_json(dst / "dataset.json", meta)
    return DatasetSummary(
        out,
        tally.n_rows,
        meta["counts"],
        meta["question_types"],
        case_info,
        failures,
        meta["decidability"],
    )
