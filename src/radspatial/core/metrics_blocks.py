"""The typed blocks of ``metrics.json`` (``core/metrics_record.Metrics`` holds them).

Each block is a frozen record with ``to_json`` (exactly the keys and values written: files are
written with sorted keys, so only which keys are present matters) and ``from_json(obj, where)``
(every older version read: a field it lacks is None; a field of the wrong type is a
``DataFileError`` naming the file, the block and the field). Keys a record does not know (a
newer version's) are kept in ``extra`` and written back unchanged.

    >>> g = GroupMetrics.from_json({"n_items": 0}, "metrics.json: overall")
    >>> g.empty, g.to_json()
    (True, {'n_items': 0})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from radspatial.core.datafiles import DataFileError

_NUM = (float, int)
_COUNT, _TEXT, _OBJ, _LIST = (int,), (str,), (dict,), (list,)


def _check(obj: Any, where: str, types: Mapping[str, tuple[type, ...]], required=()) -> dict:
    """``obj`` as an object whose known fields have their types (null allowed unless
    ``required``); a count is an integer, never true/false."""
    if not isinstance(obj, dict):
        raise DataFileError(f"{where}: must be an object, got {type(obj).__name__}")
    for key in required:
        if key not in obj or obj[key] is None:
            raise DataFileError(f"{where}: missing required field {key!r}")
    for key, allowed in types.items():
        value = obj.get(key)
        if value is None:
            continue
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            what = {int: "an integer", float: "a number", str: "a string", dict: "an object"}
            name = what.get(allowed[0], "a list")
            raise DataFileError(f"{where}: {key!r} must be {name} or null, got {value!r}")
    return obj


class _Flat:
    """A block of plain fields (``_TYPES``) plus ``extra``; ``_OPTIONAL``: written only when
    set."""

    _TYPES: ClassVar[dict[str, tuple[type, ...]]] = {}
    _OPTIONAL: ClassVar[tuple[str, ...]] = ()
    _REQUIRED: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self._TYPES}
        for key in self._OPTIONAL:
            if out[key] is None:
                del out[key]
        return out | dict(getattr(self, "extra", {}))

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Any:
        _check(obj, where, cls._TYPES, cls._REQUIRED)
        known = {k: obj.get(k) for k in cls._TYPES}
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        if "extra" in names:
            known["extra"] = {k: v for k, v in obj.items() if k not in cls._TYPES}
        return cls(**known)


_PROPORTION: dict[str, tuple[type, ...]] = {
    "n": _COUNT,
    "accuracy": _NUM,
    "ci_low": _NUM,
    "ci_high": _NUM,
}


@dataclass(frozen=True)
class Proportion(_Flat):
    """A share of right answers: how many (``n``), the accuracy and its Wilson 95 % CI. The
    blocks that report one extend it: a run's scores (``RunScores``), a subgroup's
    (``Share``), an open type's frame (``metrics_open.Accuracy``)."""

    n: int | None = None
    accuracy: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    _TYPES = _PROPORTION


@dataclass(frozen=True)
class RunScores(Proportion):
    """One run's scores of a group (``per_run``: ``metrics.BinaryMetrics.to_json``)."""

    n_valid: int | None = None
    correct: int | None = None
    f1: float | None = None  # None for open answers
    invalid_rate: float | None = None
    yes_rate: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # a plugin type's metric hook's

    _TYPES: ClassVar[dict[str, tuple[type, ...]]] = {
        "n": _COUNT,
        "n_valid": _COUNT,
        "correct": _COUNT,
    } | {k: _NUM for k in ("accuracy", "f1", "invalid_rate", "yes_rate", "ci_low", "ci_high")}


_CLUSTER: dict[str, tuple[type, ...]] = {
    "se_cluster": _NUM,
    "ci_cluster_low": _NUM,
    "ci_cluster_high": _NUM,
}
_CLUSTER |= {"n_clusters": _COUNT, "cluster_by": _TEXT, "ci_cluster_fallback": _TEXT}


@dataclass(frozen=True)
class GroupMetrics(_Flat):
    """The metrics of one group of items (``aggregate.group_metrics``): a run's overall,
    headline, each ``by_*`` entry and each frame. A group without scored items is
    ``{"n_items": 0}`` (``empty``). The cluster-robust fields are there only where items share
    a cluster (``eval/clusters.py``), ``answers`` only where some items are open."""

    n_items: int = 0
    runs: int | None = None
    accuracy_mean: float | None = None
    accuracy_std: float | None = None
    f1_mean: float | None = None
    f1_std: float | None = None
    ci_low: float | None = None  # Wilson 95 %, all runs' answers pooled
    ci_high: float | None = None
    invalid_rate: float | None = None
    yes_rate: float | None = None
    per_run: tuple[RunScores, ...] = ()
    se_cluster: float | None = None
    ci_cluster_low: float | None = None
    ci_cluster_high: float | None = None
    n_clusters: int | None = None
    cluster_by: str | None = None  # "slice", "group" or "group+slice"
    ci_cluster_fallback: str | None = None  # why the clustered CI is the Wilson one (SE 0)
    answers: str | None = None  # "open" or "mixed"
    extra: Mapping[str, Any] = field(default_factory=dict)

    _SCALARS: ClassVar[dict[str, tuple[type, ...]]] = {"n_items": _COUNT, "runs": _COUNT} | {
        k: _NUM
        for k in ("accuracy_mean", "accuracy_std", "f1_mean", "f1_std", "ci_low", "ci_high")
        + ("invalid_rate", "yes_rate")
    }
    _TYPES = _SCALARS | {"per_run": _LIST} | _CLUSTER | {"answers": _TEXT}
    _OPTIONAL = (*_CLUSTER, "answers")

    @property
    def empty(self) -> bool:
        """No scored item: written as ``{"n_items": 0}``."""
        values = (getattr(self, k) for k in self._SCALARS if k != "n_items")
        return not self.n_items and not self.per_run and all(v is None for v in values)

    def to_json(self) -> dict[str, Any]:
        if self.empty:
            return {"n_items": self.n_items} | dict(self.extra)
        out = super().to_json()
        out["per_run"] = [r.to_json() for r in self.per_run]
        return out

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Any:
        group = super().from_json(obj, where)
        runs = obj.get("per_run") or []
        per_run = tuple(
            RunScores.from_json(r, f"{where}: per_run[{i}]") for i, r in enumerate(runs)
        )
        return cls(**{**_values(group), "n_items": group.n_items or 0, "per_run": per_run})


def _values(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True)
class TypeGroup(GroupMetrics):
    """A ``by_question_type`` entry: a group plus the type's chance level (always written)."""

    chance: float | None = None

    _TYPES = GroupMetrics._TYPES | {"chance": _NUM}

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {"chance": self.chance}


@dataclass(frozen=True)
class FrameMetrics:
    """One relation axis of one setup (``frames``): its items scored in each frame, on all
    items and where frames disagree (``aggregate.frame_metrics``)."""

    # image, standard, anatomical, aligned_image, conflict_image, conflict_anatomical,
    # view_conflict_image, view_conflict_standard (those an older version wrote)
    views: Mapping[str, GroupMetrics]

    def __getitem__(self, view: str) -> GroupMetrics:
        return self.views[view]

    def get(self, view: str) -> GroupMetrics | None:
        return self.views.get(view)

    def to_json(self) -> dict[str, Any]:
        return {k: g.to_json() for k, g in self.views.items()}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> FrameMetrics:
        _check(obj, where, {})
        return cls({k: GroupMetrics.from_json(g, f"{where}: {k}") for k, g in obj.items()})


@dataclass(frozen=True)
class Agreement(_Flat):
    """McNemar's test between two runs on the same items (``run_agreement``)."""

    b: int | None = None
    c: int | None = None
    statistic: float | None = None
    p_value: float | None = None
    method: str | None = None

    _TYPES = {"b": _COUNT, "c": _COUNT, "statistic": _NUM, "p_value": _NUM, "method": _TEXT}


@dataclass(frozen=True)
class Share(Proportion):
    """Accuracy of a subgroup (``subgroups``; ``n``: answers) with its Wilson 95 % CI and the
    invalid rate."""

    invalid_rate: float | None = None

    _TYPES = _PROPORTION | {"invalid_rate": _NUM}


@dataclass(frozen=True)
class ClassShare(_Flat):
    """One class of consistency groups: count, share and its Wilson 95 % CI."""

    n: int | None = None
    share: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    _TYPES = {"n": _COUNT, "share": _NUM, "ci_low": _NUM, "ci_high": _NUM}


CONSISTENCY_CLASSES = ("all_right", "anatomy", "constant", "mixed")


@dataclass(frozen=True)
class Consistency:
    """Consistency groups of one scope (``all`` or ``setup/marker``, ``eval/consistency.py``)."""

    n_groups: int = 0
    n_incomplete: int = 0
    classes: Mapping[str, ClassShare] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        own = {"n_groups": self.n_groups, "n_incomplete": self.n_incomplete}
        return own | {k: c.to_json() for k, c in self.classes.items()}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Consistency:
        _check(obj, where, {"n_groups": _COUNT, "n_incomplete": _COUNT}, ("n_groups",))
        classes = {
            k: ClassShare.from_json(v, f"{where}: {k}")
            for k, v in obj.items()
            if k not in ("n_groups", "n_incomplete")
        }
        return cls(obj["n_groups"], obj.get("n_incomplete") or 0, classes)


_CI_KEYS = ("accuracy_ci", "coverage_ci", "accuracy_answered_ci")


@dataclass(frozen=True)
class PlainRQ1(_Flat):
    """Plain-slice RQ1 (``rq1_plain``, ``eval/rq1_plain.py``): accuracy, coverage and accuracy
    on answered, each with its Wilson 95 % interval ``[lo, hi]``."""

    definition: str | None = None
    n: int = 0  # answers over all runs
    n_items: int | None = None
    runs: int | None = None
    answered: int | None = None
    correct: int | None = None
    accuracy: float | None = None
    accuracy_ci: list | None = None
    coverage: float | None = None
    coverage_ci: list | None = None
    accuracy_answered: float | None = None
    accuracy_answered_ci: list | None = None
    # items the image decides / does not (questions/decidability.py), and the accuracy on
    # each ({"n", "correct", "accuracy", "accuracy_ci"}); absent on datasets without the field
    n_items_decidable: int | None = None
    n_items_undecidable: int | None = None
    by_decidable: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    _TYPES = {"definition": _TEXT, "by_decidable": (dict,)} | {
        k: _COUNT
        for k in ("n", "n_items", "runs", "answered", "correct")
        + ("n_items_decidable", "n_items_undecidable")
    }
    _TYPES |= {k: _NUM for k in ("accuracy", "coverage", "accuracy_answered")}
    _TYPES |= {k: _LIST for k in _CI_KEYS}
    _REQUIRED = ("n",)


@dataclass(frozen=True)
class Usage(_Flat):
    """Tokens, latency and cost of a run's calls (``usage``, ``eval/usage.py``); ``price`` and
    ``cost_usd`` only with ``eval --price``."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    calls: int | None = None
    calls_with_usage: int | None = None
    latency_s_p50: float | None = None
    latency_s_p95: float | None = None
    price: Mapping[str, Any] | None = None
    cost_usd: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    _TYPES = {
        k: _COUNT
        for k in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "calls")
        + ("calls_with_usage",)
    }
    _TYPES |= {"latency_s_p50": _NUM, "latency_s_p95": _NUM, "price": _OBJ, "cost_usd": _NUM}
    _OPTIONAL = ("price", "cost_usd")
