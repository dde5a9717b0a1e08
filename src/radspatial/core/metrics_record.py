"""``Metrics``: the typed ``metrics.json`` of one run folder (as nnU-Net's ``PlansManager``
types its plans file: the blocks are attributes, not string keys into a dict).

``eval/aggregate.compute_metrics`` builds it, ``eval/runner`` (and the lmms-eval and inspect
imports) add the ``usage`` and ``judge`` blocks and write ``to_json()``; the report,
``spar-table`` and the console read it back with ``read_metrics``. ``to_json`` gives exactly
the keys and values written (the file is written with sorted keys); ``from_json`` reads every
earlier version (a block it lacks is None or empty; ``errors`` is the old name of
``n_errors``) and refuses a malformed file with one ``DataFileError`` line naming the file and
the field. The block another stage owns the shape of (``mirp``: eval/mirp.py) is checked to
be an object and kept as read (``open`` and ``judge`` are ``core/metrics_open.py``'s records);
keys this version does not know are kept in ``extra`` and written back.

    >>> m = Metrics.from_json({"model": "m", "runs": 1, "overall": {"n_items": 0}}, "x.json")
    >>> m.overall.empty, m.n_errors, m.by_setup
    (True, 0, {})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.gates import model_name
from radspatial.core.metrics_blocks import (
    Agreement,
    Consistency,
    FrameMetrics,
    GroupMetrics,
    PlainRQ1,
    Share,
    TypeGroup,
    Usage,
    _check,
)
from radspatial.core.metrics_open import JudgeSummary, OpenTypeMetrics

METRICS_FILE = "metrics.json"
# the ``by_*`` sections: key -> group ("rq1/numbers", "relative_position|rq2/dots", ...)
BY_SECTIONS: tuple[str, ...] = (
    "by_setup_marker",
    "by_setup",
    "by_question_type_setup_marker",
    "by_relation",
)
BY_SECTIONS += ("by_transform", "by_setup_transform", "by_variant", "by_pair")
# decidable | undecidable: whether the image decides the item (questions/decidability.py);
# items of datasets made before the rule are in neither
BY_SECTIONS += ("by_decidable",)
_OPAQUE = ("mirp",)  # an object whose shape its own stage owns (eval/mirp.py)


def _mapping(obj: Any, where: str, read: Callable[[Any, str], Any]) -> dict[str, Any]:
    _check(obj, where, {})
    return {str(k): read(v, f"{where}[{k!r}]") for k, v in obj.items()}


@dataclass(frozen=True)
class Metrics:
    """Every metric of one run folder (``metrics.json``; docs/format.md lists the blocks)."""

    model: str | None = None
    runs: int | None = None
    n_rows: int | None = None  # result rows, failed calls included
    n_errors: int = 0  # failed calls (no answer), left out of every metric
    overall: GroupMetrics = field(default_factory=GroupMetrics)
    headline: GroupMetrics = field(default_factory=GroupMetrics)  # relative position, RQ1-RQ3
    rq1_plain: PlainRQ1 | None = None
    by_setup_marker: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_setup: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_question_type: Mapping[str, TypeGroup] = field(default_factory=dict)
    by_question_type_setup_marker: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_relation: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_transform: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_setup_transform: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_variant: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_pair: Mapping[str, GroupMetrics] = field(default_factory=dict)
    by_decidable: Mapping[str, GroupMetrics] = field(default_factory=dict)
    frames: Mapping[str, Mapping[str, FrameMetrics]] = field(default_factory=dict)
    run_agreement: Mapping[str, Agreement] = field(default_factory=dict)
    mirp: Mapping[str, Any] = field(default_factory=dict)  # eval/mirp.mirp_block
    subgroups: Mapping[str, Mapping[str, Share]] = field(default_factory=dict)
    open: Mapping[str, OpenTypeMetrics] | None = None  # grading/summary.open_metrics
    by_plane: Mapping[str, Metrics] | None = None  # coronal/sagittal items only
    consistency: Mapping[str, Consistency] | None = None  # consistency groups only
    usage: Usage | None = None  # eval/usage.usage_block (added by the runner)
    judge: JudgeSummary | None = None  # eval --judge only
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys of a newer version
    # read from a file that named the failed calls ``errors``
    legacy_errors: bool = field(default=False, compare=False)

    def section(self, name: str) -> Mapping[str, GroupMetrics]:
        """A ``by_*`` section by its name (``BY_SECTIONS`` or ``by_question_type``)."""
        if name not in (*BY_SECTIONS, "by_question_type"):
            raise KeyError(name)
        return getattr(self, name)

    def with_blocks(self, **blocks: Any) -> Metrics:
        """A copy with blocks replaced (``usage=``, ``judge=``)."""
        return replace(self, **blocks)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "runs": self.runs}
        out["n_rows"] = self.n_rows
        out["errors" if self.legacy_errors else "n_errors"] = self.n_errors
        out["overall"] = self.overall.to_json()
        out["headline"] = self.headline.to_json()
        if self.rq1_plain is not None:
            out["rq1_plain"] = self.rq1_plain.to_json()
        for name in (*BY_SECTIONS, "by_question_type", "run_agreement"):
            out[name] = {k: g.to_json() for k, g in getattr(self, name).items()}
        out["frames"] = {
            s: {axis: f.to_json() for axis, f in axes.items()} for s, axes in self.frames.items()
        }
        out["mirp"] = dict(self.mirp)
        out["subgroups"] = {
            name: {k: c.to_json() for k, c in cells.items()}
            for name, cells in self.subgroups.items()
        }
        if self.open is not None:
            out["open"] = {k: t.to_json() for k, t in self.open.items()}
        if self.judge is not None:
            out["judge"] = self.judge.to_json()
        if self.by_plane is not None:
            out["by_plane"] = {p: m.to_json() for p, m in self.by_plane.items()}
        if self.consistency is not None:
            out["consistency"] = {k: c.to_json() for k, c in self.consistency.items()}
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        return out | dict(self.extra)

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Metrics:
        """``where``: the file (``"runs/x/metrics.json"``); every error names it."""
        counts = {"runs": (int,), "n_rows": (int,), "n_errors": (int,), "errors": (int,)}
        blocks: tuple[str, ...] = (
            *_OPAQUE,
            "open",
            "judge",
            *BY_SECTIONS,
            "by_question_type",
            "overall",
            "headline",
            "frames",
        )
        blocks += ("run_agreement", "subgroups", "rq1_plain", "usage", "consistency", "by_plane")
        _check(obj, where, {"model": (str,), **counts, **dict.fromkeys(blocks, (dict,))})
        values: dict[str, Any] = {k: obj.get(k) for k in ("model", "runs", "n_rows")}
        if values["model"] is not None:  # shown in every table, figure and console line
            model = model_name(values["model"], source=where, field="'model'", error=DataFileError)
            values["model"] = model
        values["n_errors"] = obj.get("n_errors", obj.get("errors")) or 0
        values["legacy_errors"] = "n_errors" not in obj and "errors" in obj
        for name in ("overall", "headline"):
            if obj.get(name) is not None:
                values[name] = GroupMetrics.from_json(obj[name], f"{where}: {name}")
        for name in BY_SECTIONS:
            values[name] = _mapping(obj.get(name) or {}, f"{where}: {name}", GroupMetrics.from_json)
        values.update(_blocks(obj, where))
        known = {f.name for f in fields(cls)} | {"errors"}
        values["extra"] = {k: v for k, v in obj.items() if k not in known}
        return cls(**values)


def _nested(
    obj: Mapping[str, Any], name: str, where: str, read: Callable[[Any, str], Any]
) -> dict[str, Any]:
    """Block ``name`` as a mapping of mappings of records (``frames``: setup -> axis -> frame
    metrics; ``subgroups``: kind -> cell -> share), each record read by ``read``."""
    return _mapping(
        obj.get(name) or {}, f"{where}: {name}", lambda inner, w: _mapping(inner, w, read)
    )


def _blocks(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The blocks other than the group sections (each None or empty where absent)."""
    out: dict[str, Any] = {}
    types = obj.get("by_question_type") or {}
    out["by_question_type"] = _mapping(types, f"{where}: by_question_type", TypeGroup.from_json)
    out["frames"] = _nested(obj, "frames", where, FrameMetrics.from_json)
    agree = obj.get("run_agreement") or {}
    out["run_agreement"] = _mapping(agree, f"{where}: run_agreement", Agreement.from_json)
    out["subgroups"] = _nested(obj, "subgroups", where, Share.from_json)
    out["mirp"] = obj.get("mirp") or {}
    if obj.get("open") is not None:
        out["open"] = _mapping(obj["open"], f"{where}: open", OpenTypeMetrics.from_json)
    if obj.get("judge") is not None:
        out["judge"] = JudgeSummary.from_json(obj["judge"], f"{where}: judge")
    if obj.get("rq1_plain") is not None:
        out["rq1_plain"] = PlainRQ1.from_json(obj["rq1_plain"], f"{where}: rq1_plain")
    if obj.get("usage") is not None:
        out["usage"] = Usage.from_json(obj["usage"], f"{where}: usage")
    if obj.get("consistency") is not None:
        groups = obj["consistency"]
        out["consistency"] = _mapping(groups, f"{where}: consistency", Consistency.from_json)
    if obj.get("by_plane") is not None:
        out["by_plane"] = _mapping(obj["by_plane"], f"{where}: by_plane", Metrics.from_json)
    return out


def read_metrics(path: Path) -> Metrics:
    """A run's ``metrics.json`` (``path``: the file or its run folder); a missing file, bad
    JSON or a malformed block is a ``DataFileError`` naming the file."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.exists():  # anything else there (a FIFO, a device): read_json refuses it
        raise DataFileError(f"{path}: no such file (did the eval finish?)")
    return Metrics.from_json(read_json(path, want=dict), str(path))
