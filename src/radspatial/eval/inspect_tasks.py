"""inspect_ai tasks of a radspatial dataset (``pip install 'radspatial[inspect]'``).

inspect finds them through radspatial's ``inspect_ai`` entry point (pyproject.toml), so::

    inspect eval radspatial/bench -T data=bench/ --model openai-api/local/agent
    inspect eval radspatial/mirp -T data=bench/ --model openai/gpt-4o

``radspatial/bench`` asks with our prompts and parser, ``radspatial/mirp`` with MIRP's protocol
(its examples, its prompt, its parser). Task arguments (``-T``): ``data`` (required), and as
``radspatial eval`` takes them, ``setups``, ``markers``, ``questions`` (comma-separated),
``limit``, ``limit_seed``. Each item is one Sample: the prompt's text, then the image (the order
``radspatial eval`` sends); its target is the answer in the shown image and its metadata
(``inspect_items.sample_metadata``) the answers in all three frames, the setup, marker, type,
view, pair, plane, consistency group and cluster. Decoding is ``eval``'s default (temperature 0,
1024 tokens, top_p 1, seed 0); ``--temperature`` and the like override it as usual.

The scorer reads the reply with radspatial's own rules (``eval.results.result_row``: our parser,
or MIRP's under ``mirp``; the open types by ``grading``'s rules, no judge) and scores it in each
frame: ``image``, ``standard``, ``anatomical`` (NaN, so unscored, where the item has no answer in
that frame), and ``invalid`` (1 when the reply could not be read: counted wrong in every frame,
as ``eval`` counts it). Each frame's accuracy comes with inspect's clustered standard error
over the ``cluster`` metadata (the same CR1 formula as ``eval.clusters``). ``radspatial import
inspect`` rescores the log's replies against the dataset rather than trusting these scores.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, Content, ContentImage, ContentText, GenerateConfig
from inspect_ai.scorer import Score, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import TaskState, generate

from radspatial.eval.inspect_items import TaskSpec, sample_metadata, task_items
from radspatial.models.base import Decoding

FRAMES = {"image": "correct", "standard": "correct_standard", "anatomical": "correct_anatomical"}


@lru_cache(maxsize=8)
def _loaded(spec: TaskSpec) -> tuple[dict[str, Any], Any]:
    items, prompt = task_items(spec)
    return {i.id: i for i in items}, prompt


def _sample(item: Any, prompt: str) -> Sample:
    content: list[Content] = [ContentText(text=prompt), ContentImage(image=str(item.image))]
    return Sample(
        id=item.id,
        input=[ChatMessageUser(content=content)],
        target=str(item.expected),
        metadata=sample_metadata(item),
    )


def _frame_value(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float("nan") if value is None else float(bool(value))


@scorer(
    metrics={
        **{f: [accuracy(), stderr(cluster="cluster")] for f in FRAMES},
        "invalid": [mean()],
    }
)
def frames(spec_args: dict[str, Any]) -> Any:
    """radspatial's reading of the reply, scored in the three frames (see the module doc)."""
    spec = TaskSpec.from_args(spec_args)

    async def score(state: TaskState, target: Target) -> Score:
        from radspatial.eval.results import result_row

        by_id, prompt = _loaded(spec)
        item = by_id[str(state.sample_id)]
        call = {"reply": state.output.completion, "error": None}
        row = result_row(item, 0, call, prompt(item), spec.protocol).to_json()
        value = {f: _frame_value(row, k) for f, k in FRAMES.items()}
        value["invalid"] = float(row.get("parsed") is None)
        return Score(
            value=value,
            answer=None if row.get("parsed") is None else str(row["parsed"]),
            explanation=f"read as {row.get('parsed')!r}; expected {row['expected']!r}",
        )

    return score


def _task(spec_args: dict[str, Any]) -> Task:
    # inspect prints a PrerequisiteError as its one line, without the traceback of a bug
    from inspect_ai._util.error import PrerequisiteError

    try:
        spec = TaskSpec.from_args(spec_args)
        by_id, prompt = _loaded(spec)
        if not by_id:
            raise ValueError(f"{spec.data}: no items (check -T setups/markers/questions)")
    except ValueError as exc:  # bad -T arguments or data: the user's to fix
        raise PrerequisiteError(f"radspatial: {exc}") from None
    samples = [_sample(item, prompt(item)) for item in by_id.values()]
    d = Decoding()
    config = GenerateConfig(
        temperature=d.temperature, max_tokens=d.max_tokens, top_p=d.top_p, seed=d.seed
    )
    name = Path(spec.data).name or "radspatial"
    return Task(
        dataset=MemoryDataset(samples, name=name),
        solver=generate(),
        scorer=frames(spec_args),
        config=config,
        metadata={"radspatial_protocol": spec.protocol},
    )


def _args(**kwargs: Any) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}


def _protocol_task(protocol: str, about: str) -> Callable[..., Task]:
    """The task that asks under ``protocol``; its parameters are the ``-T`` arguments."""

    def protocol_task(
        data: str,
        setups: str | None = None,
        markers: str | None = None,
        questions: str | None = None,
        limit: int | None = None,
        limit_seed: int = 0,
    ) -> Task:
        kwargs = {"setups": setups, "markers": markers, "questions": questions}
        return _task(
            _args(data=data, protocol=protocol, **kwargs, limit=limit, limit_seed=limit_seed)
        )

    protocol_task.__doc__ = about
    return protocol_task


bench = task(name="bench")(
    _protocol_task(
        "radspatial",
        "A radspatial dataset with radspatial's prompts and parser (``radspatial eval``).",
    )
)
mirp = task(name="mirp")(
    _protocol_task(
        "mirp", "A radspatial dataset under MIRP's protocol (``radspatial eval --protocol mirp``)."
    )
)
