"""``radspatial export lmms-eval``: a generated dataset as an lmms-eval task folder.

``OUT/`` holds one task per setup (``NAME_rq1.yaml`` ...), the group ``NAME.yaml`` over them,
``utils.py`` (the hooks, all in ``radspatial.formats.lmms_tasks``), ``radspatial_task.json``
(protocol, markers per setup, MIRP's examples under ``--protocol mirp``), ``requirements.txt``
pinning the radspatial version the hooks need, and ``hf/``: the dataset as ``datasets`` parquet
(``formats.hf_export``). lmms-eval runs it with ``--include_path OUT --tasks NAME``.

The YAML names the parquet shards by absolute path (lmms-eval resolves ``data_files`` from its
working folder): export again after moving the folder.

Example:
    >>> export_lmms(Path("bench"), Path("bench_lmms"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from radspatial import __version__
from radspatial.core.jobspec import ParamError
from radspatial.formats.lmms_tasks import TASK_FILE, metric_names

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
PROTOCOLS = ("radspatial", "mirp")


@dataclass(frozen=True)
class LmmsExport:
    out: Path
    name: str
    tasks: tuple[str, ...]
    n_items: int


def _task_yaml(name: str, setup: str, shards: str, markers: tuple[str, ...], info: dict) -> str:
    from radspatial.models.base import Decoding

    d = Decoding()
    metrics = "".join(
        f"  - metric: {m}\n    aggregation: !function utils.aggregate_{m}\n"
        f"    higher_is_better: {'false' if m == 'invalid_rate' else 'true'}\n"
        for m in metric_names(markers, setup)
    )
    return (
        f"# radspatial {__version__}: setup {setup} of {name} (radspatial export lmms-eval)\n"
        f"task: {name}_{setup}\n"
        "dataset_path: parquet\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {json.dumps(shards)}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        f"process_docs: !function utils.process_docs_{setup}\n"
        "doc_to_visual: !function utils.doc_to_visual\n"
        "doc_to_text: !function utils.doc_to_text\n"
        "doc_to_messages: !function utils.doc_to_messages\n"
        "doc_to_target: answer\n"
        f"process_results: !function utils.process_results_{setup}\n"
        "generation_kwargs:\n"
        f"  max_new_tokens: {d.max_tokens}\n"
        f"  temperature: {d.temperature}\n"
        f"  top_p: {d.top_p}\n"
        f"  seed: {d.seed}\n"
        "  do_sample: false\n"
        f"metric_list:\n{metrics}"
        "# lmms-eval's clustered standard errors: each logged dict's item cluster and 0/1 score\n"
        "cluster_key: cluster\n"
        "score_key: score\n"
        "metadata:\n"
        "  version: 1.0\n"
        f"  radspatial: {json.dumps(info['radspatial'])}\n"
        f"  protocol: {info['protocol']}\n"
    )


def _group_yaml(name: str, tasks: list[str]) -> str:
    listed = "".join(f"  - {t}\n" for t in tasks)
    return (
        f"# radspatial {__version__}: every setup of {name}; accuracy pooled over their items\n"
        f"group: {name}\n"
        f"task:\n{listed}"
        "aggregate_metric_list:\n"
        "  - metric: accuracy\n"
        "    aggregation: mean\n"
        "    weight_by_size: true\n"
        "metadata:\n"
        "  version: 1.0\n"
    )


def _utils_py(name: str, markers: dict[str, tuple[str, ...]]) -> str:
    names = sorted({m for s, ms in markers.items() for m in metric_names(ms, s)})
    lines = [
        f'"""lmms-eval hooks of the radspatial task {name}: radspatial\'s prompt, parser and',
        "scoring (radspatial.formats.lmms_tasks). Written by radspatial export lmms-eval; needs",
        f'radspatial=={__version__} (requirements.txt)."""',
        "",
        "from pathlib import Path",
        "",
        "from radspatial.formats.lmms_tasks import task_hooks",
        "",
        f'_hooks = task_hooks(Path(__file__).resolve().parent, needs="{__version__}")',
        "doc_to_visual = _hooks.doc_to_visual",
        "doc_to_text = _hooks.doc_to_text",
        "doc_to_messages = _hooks.doc_to_messages",
        *(f'process_docs_{s} = _hooks.process_docs_for("{s}")' for s in markers),
        *(f'process_results_{s} = _hooks.process_results_for("{s}")' for s in markers),
        *(f'aggregate_{m} = _hooks.aggregation("{m}")' for m in names),
        "",
    ]
    return "\n".join(lines)


def export_lmms(
    data: Path,
    out: Path,
    *,
    name: str = "radspatial",
    protocol: str = "radspatial",
    overwrite: bool = False,
) -> LmmsExport:
    """Write ``data`` (a ``radspatial generate`` folder) as an lmms-eval task folder ``out``.

    Yes/no question types only (the open types need radspatial's grader); raises ValueError on
    a bad dataset, name or protocol.
    """
    from radspatial.core.io import atomic_write_json
    from radspatial.core.staging import staged
    from radspatial.eval.items import load_items
    from radspatial.eval.runner import mirp_examples
    from radspatial.formats.hf_export import export_hf
    from radspatial.formats.lmms_tasks import scored_here

    if not NAME_RE.fullmatch(name):
        why = f"{{param}} must be letters, digits and _ (a letter first), got {name!r}"
        raise ParamError("name", why)
    if protocol not in PROTOCOLS:
        why = f"{{param}} must be one of {', '.join(PROTOCOLS)}, got {protocol!r}"
        raise ParamError("protocol", why)
    items = [i for i in load_items(Path(data)) if scored_here(i.question_type)]
    if not items:
        raise ValueError(f"{data}: no yes/no questions (lmms-eval tasks hold yes/no types only)")
    order = ("rq1", "rq2", "rq3", "as")
    setups = sorted({i.setup for i in items}, key=order.index)
    markers = {s: tuple(sorted({i.marker for i in items if i.setup == s})) for s in setups}
    info: dict = {"radspatial": __version__, "protocol": protocol, "name": name}
    info["markers"] = {s: list(m) for s, m in markers.items()}
    if protocol == "mirp":  # MIRP's examples of run 0, drawn over the whole dataset
        info["examples"] = {k: list(v) for (k, run), v in mirp_examples(items, 1).items()}
    out = Path(out)
    shards = str(out.resolve() / "hf" / "data" / "test-*.parquet")
    tasks = [f"{name}_{s}" for s in setups]
    made = (TASK_FILE, "an lmms-eval task folder")
    with staged(out, overwrite, {"--data": Path(data)}, made) as stage:
        export_hf(Path(data), stage / "hf", name=name)
        atomic_write_json(stage / TASK_FILE, info)
        for s in setups:
            yaml = _task_yaml(name, s, shards, markers[s], info)
            (stage / f"{name}_{s}.yaml").write_text(yaml, encoding="utf-8")
        (stage / f"{name}.yaml").write_text(_group_yaml(name, tasks), encoding="utf-8")
        (stage / "utils.py").write_text(_utils_py(name, markers), encoding="utf-8")
        (stage / "requirements.txt").write_text(f"radspatial=={__version__}\n", encoding="utf-8")
    return LmmsExport(out, name, tuple(tasks), len(items))
