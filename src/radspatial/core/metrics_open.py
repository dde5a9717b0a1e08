"""The open question types' and the judge's blocks of ``metrics.json`` (``open``, ``judge``),
typed as the other blocks are (``core/metrics_blocks.py``: ``to_json`` exactly the keys and
values written, ``from_json`` one ``DataFileError`` line naming file, block and field; keys a
record does not know kept in ``extra``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from radspatial.core.metrics_blocks import _COUNT, _NUM, _OBJ, _TEXT, Proportion, _check, _Flat


@dataclass(frozen=True)
class Accuracy(Proportion):
    """An open type's accuracy in one frame (``open``): answers, accuracy and its Wilson 95 %
    CI (``{"n": 0}`` without answers)."""

    n: int = 0  # always written: 0 without answers

    _OPTIONAL = ("accuracy", "ci_low", "ci_high")


OPEN_FRAMES = ("image", "standard", "anatomical")


@dataclass(frozen=True)
class OpenTypeMetrics:
    """One open question type (``open``, ``grading/summary.open_metrics``): chance, accuracy
    per frame, the invalid rate and how the answers were graded (source and rules' status)."""

    chance: float | None = None
    frames: Mapping[str, Accuracy] = field(default_factory=dict)  # OPEN_FRAMES
    invalid_rate: float | None = None
    graded_by: Mapping[str, int] = field(default_factory=dict)  # rules | judge | none
    rules_status: Mapping[str, int] = field(default_factory=dict)  # answer | invalid | ...
    extra: Mapping[str, Any] = field(default_factory=dict)

    def frame(self, name: str) -> Accuracy:
        return self.frames.get(name) or Accuracy()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chance": self.chance}
        out |= {f: self.frame(f).to_json() for f in OPEN_FRAMES}
        out |= {"invalid_rate": self.invalid_rate, "graded_by": dict(self.graded_by)}
        return out | {"rules_status": dict(self.rules_status)} | dict(self.extra)

    @classmethod
    def from_json(cls, obj: Any, where: str) -> OpenTypeMetrics:
        counts = {"graded_by": _OBJ, "rules_status": _OBJ}
        _check(obj, where, {"chance": _NUM, "invalid_rate": _NUM, **counts})
        frames = {f: Accuracy.from_json(obj[f], f"{where}: {f}") for f in OPEN_FRAMES if f in obj}
        known = {"chance", "invalid_rate", *counts, *OPEN_FRAMES}
        return cls(
            chance=obj.get("chance"),
            frames=frames,
            invalid_rate=obj.get("invalid_rate"),
            graded_by=dict(obj.get("graded_by") or {}),
            rules_status=dict(obj.get("rules_status") or {}),
            extra={k: v for k, v in obj.items() if k not in known},
        )


@dataclass(frozen=True)
class JudgeAgreement(_Flat):
    """The rules against the judge where both decided (``judge.rules_vs_judge``)."""

    n: int | None = None
    agreement: float | None = None
    kappa: float | None = None

    _TYPES = {"n": _COUNT, "agreement": _NUM, "kappa": _NUM}


@dataclass(frozen=True)
class Calibration(_Flat):
    """The judge on the shipped calibration set (``judge.calibration``)."""

    n: int | None = None
    judge_accuracy: float | None = None
    rules_accuracy_decided: float | None = None
    rules_undecided: int | None = None

    _TYPES = {"n": _COUNT, "judge_accuracy": _NUM, "rules_accuracy_decided": _NUM}
    _TYPES |= {"rules_undecided": _COUNT}


@dataclass(frozen=True)
class JudgeSummary(_Flat):
    """``judge`` (``eval --judge``; ``grading/judge.apply_judge``'s summary without its
    prompt): which judge, how many open rows it graded, its agreement with the rules and its
    accuracy on the calibration set."""

    judge: str | None = None
    version: str | None = None
    decoding: Mapping[str, Any] | None = None
    seed: int | None = None
    judge_all: bool | None = None
    n_open_rows: int | None = None
    n_judged: int | None = None
    judge_needed_rate: float | None = None
    n_judge_failed: int | None = None
    rules_vs_judge: JudgeAgreement = field(default_factory=JudgeAgreement)
    calibration: Calibration = field(default_factory=Calibration)
    extra: Mapping[str, Any] = field(default_factory=dict)

    _TYPES = {"judge": _TEXT, "version": _TEXT, "decoding": _OBJ, "seed": _COUNT}
    _TYPES |= {"judge_all": (bool,), "judge_needed_rate": _NUM}
    _TYPES |= {k: _COUNT for k in ("n_open_rows", "n_judged", "n_judge_failed")}
    _TYPES |= {"rules_vs_judge": _OBJ, "calibration": _OBJ}

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["rules_vs_judge"] = self.rules_vs_judge.to_json()
        return out | {"calibration": self.calibration.to_json()}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Any:
        summary = super().from_json(obj, where)
        agree = JudgeAgreement.from_json(obj.get("rules_vs_judge") or {}, f"{where}: agreement")
        calib = Calibration.from_json(obj.get("calibration") or {}, f"{where}: calibration")
        return replace(summary, rules_vs_judge=agree, calibration=calib)
