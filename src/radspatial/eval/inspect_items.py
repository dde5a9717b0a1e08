"""What an inspect_ai task of a radspatial dataset holds, without inspect_ai: the items, their
prompts and their metadata, shared by the tasks (``eval.inspect_tasks``) and ``radspatial import
inspect`` (``formats.inspect_import``), so both rebuild the same items from the same task arguments.

The items and prompts are ``radspatial eval``'s for ``--runs 1`` with the same filters: the same
``load_items`` and ``sample_items`` (``limit``), the same prompt template (ours, or MIRP's with
the examples ``runner.mirp_examples`` draws for run 0). inspect's ``--epochs`` ask every epoch
with run 0's prompt (under ``mirp`` radspatial eval's later runs draw other examples).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.core.errors import check_one_of
from radspatial.eval.items import EvalItem
from radspatial.imaging.planes import DEFAULT_PLANE

PROTOCOLS = ("radspatial", "mirp")


def _names(value: Any, what: str) -> tuple[str, ...] | None:
    """``-T setups=rq1,rq2`` (a string) or a YAML list, as a tuple; None for all."""
    if value is None or value == "":
        return None
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple) or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"-T {what} must be comma-separated names, got {value!r}")
    return tuple(p.strip() for p in parts if p.strip()) or None


@dataclass(frozen=True)
class TaskSpec:
    """A task's arguments (``-T name=value``), as inspect records them in the log."""

    data: Path
    protocol: str = "radspatial"
    setups: tuple[str, ...] | None = None
    markers: tuple[str, ...] | None = None
    questions: tuple[str, ...] | None = None
    limit: int | None = None  # N items spread over setups/markers/types (eval --limit)
    limit_seed: int = 0

    @classmethod
    def from_args(cls, args: Mapping[str, Any], data: Path | None = None) -> TaskSpec:
        """From the task's arguments (``data`` given: it replaces the recorded one)."""
        where = data if data is not None else args.get("data")
        if where is None or where == "":
            raise ValueError("-T data=DATASET is required (a radspatial generate folder)")
        protocol = args.get("protocol") or "radspatial"
        check_one_of(protocol, PROTOCOLS, "-T protocol")
        limit, seed = args.get("limit"), args.get("limit_seed") or 0
        for name, value in (("limit", limit), ("limit_seed", seed)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"-T {name} must be an integer, got {value!r}")
        return cls(
            data=Path(where),
            protocol=protocol,
            setups=_names(args.get("setups"), "setups"),
            markers=_names(args.get("markers"), "markers"),
            questions=_names(args.get("questions"), "questions"),
            limit=limit,
            limit_seed=seed,
        )


def task_items(spec: TaskSpec) -> tuple[list[EvalItem], Callable[[EvalItem], str]]:
    """The task's items (``eval``'s order) and ``prompt(item)``, as ``eval --runs 1`` has them."""
    from radspatial.eval.items import load_items, sample_items
    from radspatial.eval.runner import EvalConfig, prompts_for

    items = load_items(
        spec.data, setups=spec.setups, markers=spec.markers, question_types=spec.questions
    )
    if spec.limit is not None:
        items = sample_items(items, spec.limit, seed=spec.limit_seed)
    config = EvalConfig(model="inspect", runs=1, protocol=spec.protocol, limit=spec.limit)
    prompts = prompts_for(items, config)
    return items, lambda item: prompts(item, 0)


def sample_metadata(item: EvalItem) -> dict[str, Any]:
    """A Sample's metadata: what the item is (setup, marker, type, relation, view, pair, plane,
    consistency group, whether the image decides it, and the cluster its errors are correlated
    within) and its answer in the three frames (``targets``: image, standard view, anatomical)."""
    from radspatial.eval.clusters import cluster_of

    fields = ("setup", "marker", "question_type", "relation", "pair", "variant")
    meta: dict[str, Any] = {k: getattr(item, k) for k in fields}
    meta["view"] = item.transform  # the shown rotation/flip (A1..B4), None on AS
    meta["plane"] = item.extra.get("plane") or DEFAULT_PLANE
    meta["group"] = item.extra.get("group")
    # whether the image decides it (questions/decidability.py; None: unknown)
    meta["decidable"] = item.extra.get("decidable")
    meta["decidable_reason"] = item.extra.get("decidable_reason")
    meta["cluster"] = cluster_of({"id": item.id, **item.extra})
    meta["targets"] = {
        "image": item.expected,
        "standard": item.expected_standard,
        "anatomical": item.expected_anatomical,
    }
    return meta
