"""``radspatial export hf``: a generated dataset as Hugging Face ``datasets`` parquet shards.

Writes ``OUT/data/test-0000k-of-0000n.parquet`` (one row per question: every ``manifest.jsonl``
field, with ``image`` (and ``mask`` when exported) as an ``Image`` feature holding the PNG
bytes) and ``OUT/README.md``, a dataset card with the YAML header the Hub reads, the counts,
the columns, and the licence and provenance (sha256) of every source CT. ``datasets`` is not
needed to write it (pyarrow only, ``pip install 'radspatial[hf-export]'``); it reads it with
``load_dataset("parquet", data_dir=OUT/"data")`` or ``load_dataset(str(OUT))``.

Every row carries ``modality`` (CT or MR: the manifest's, else the dataset's, else CT as every
dataset before MR), and the card counts the questions per modality.

Source paths in ``source.ct``/``source.seg`` are reduced to file names (the sha256 identifies
the file; a published dataset should not carry the generating machine's folders).

Example:
    >>> export_hf(Path("bench"), Path("bench_hf"), license="cc-by-4.0")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePath
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json, read_json_lines
from radspatial.core.jobspec import ParamError
from radspatial.core.modality import modality_of
from radspatial.core.safepath import inside
from radspatial.core.textsafe import md_code, md_text
from radspatial.questions.manifest import ManifestRow

SPLIT = "test"  # a benchmark: every question is for evaluation
IMAGE_COLUMNS = ("image", "mask")
ANSWER_COLUMNS = ("answer", "answer_standard", "answer_anatomical")
MISSING_PYARROW = "export hf needs pyarrow: pip install 'radspatial[hf-export]'"
_BUNDLED_LICENCE = "LICENSE.totalsegmentator"


@dataclass(frozen=True)
class HFExport:
    out: Path
    shards: list[Path]
    n_rows: int
    license: str
    columns: list[str]


def _arrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        raise ValueError(MISSING_PYARROW) from exc
    return pyarrow


def _bundled_sha() -> set[str]:
    root = resources.files("radspatial.data")
    return {hashlib.sha256((root / n).read_bytes()).hexdigest() for n in ("example_ct_sm.nii.gz",)}


def _row(root: Path, where: str, row: dict[str, Any], modality: str) -> dict[str, Any]:
    out = {**row, "modality": row.get("modality") or modality}
    for col in IMAGE_COLUMNS:
        if row.get(col) is None:
            continue
        path = inside(root, row[col], where=where, what=col)
        try:
            out[col] = {"bytes": path.read_bytes(), "path": str(row[col])}
        except OSError as exc:
            raise ValueError(f"{where}: {col} {row[col]!r}: {exc.strerror or exc}") from None
    source = row.get("source")
    if isinstance(source, dict):
        out["source"] = {
            k: PurePath(v).name if k in ("ct", "seg") and isinstance(v, str) else v
            for k, v in source.items()
        }
    return out


TEXT_ANSWERS_NOTE = (
    'The answer columns are text: this dataset mixes yes/no questions (`"1"` yes, `"0"` '
    'no) with open ones (a word such as `"left"` or a count such as `"2"`); '
    "`question_type` says which.\n"
)


def _answers_as_text(rows: list[dict[str, Any]]) -> bool:
    """Open answers (words, counts) beside yes/no 1/0 in one column: all written as text, since
    a parquet column has one type. In place; True when it did so."""
    if not any(isinstance(r.get(c), str) for r in rows for c in ANSWER_COLUMNS):
        return False
    for r in rows:
        for c in ANSWER_COLUMNS:
            if r.get(c) is not None:
                r[c] = str(r[c])
    return True


def _schema(rows: list[dict[str, Any]]) -> Any:
    """One schema for every shard: inferred from all rows (image bytes left out), images as
    the ``Image`` feature's struct, with the feature named in the metadata ``datasets`` reads."""
    pa = _arrow()
    keys = list(dict.fromkeys(k for r in rows for k in r))  # every row's fields, not the first's
    light = {k: [None if k in IMAGE_COLUMNS else r.get(k) for r in rows] for k in keys}
    try:
        inferred = pa.Table.from_pydict(light).schema
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"manifest.jsonl: fields of mixed types ({exc})") from None
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    present = [c for c in IMAGE_COLUMNS if any(r.get(c) is not None for r in rows)]
    fields = [
        pa.field(f.name, image) if f.name in present else f
        for f in inferred
        if f.name not in IMAGE_COLUMNS or f.name in present
    ]
    features = {c: {"_type": "Image"} for c in present}
    meta = {"huggingface": json.dumps({"info": {"features": features}})}
    return pa.schema(fields, metadata=meta)


def _shards(rows: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    groups: list[list[dict[str, Any]]] = [[]]
    size = 0
    for r in rows:
        n = sum(len(r[c]["bytes"]) for c in IMAGE_COLUMNS if isinstance(r.get(c), dict))
        if groups[-1] and size + n > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(r)
        size += n
    return groups


def _check_options(max_shard_mb: float, license: str | None) -> None:
    """The shard size and licence id, refused naming their parameter (``core/jobspec``)."""
    if not (math.isfinite(max_shard_mb) and max_shard_mb > 0):
        why = f"{{param}} must be a finite number > 0, got {max_shard_mb}"
        raise ParamError("max_shard_mb", why)
    if license is not None and not _LICENCE.fullmatch(license):
        raise ParamError(
            "license", f"{{param}} {license!r}: not a licence id (letters, digits, .+-)"
        )


def export_hf(
    data: Path,
    out: Path,
    *,
    license: str | None = None,
    name: str | None = None,
    max_shard_mb: float = 256.0,
    overwrite: bool = False,
) -> HFExport:
    """Write ``data`` (a ``radspatial generate`` folder) as parquet shards + card into ``out``.

    ``license``: the dataset's licence as a Hub identifier (e.g. ``cc-by-4.0``); by default
    ``apache-2.0`` when every source is the bundled TotalSegmentator example, else ``other``
    (the card then says the licence is not stated). Raises ValueError on a bad dataset.
    """
    from radspatial.core.staging import staged

    pa = _arrow()
    import pyarrow.parquet as pq

    data = Path(data)
    manifest, info_path = data / "manifest.jsonl", data / "dataset.json"
    if not manifest.is_file() or not info_path.is_file():
        raise ValueError(f"{data}: not a radspatial dataset (needs manifest.jsonl, dataset.json)")
    _check_options(max_shard_mb, license)
    info = _dataset_info(info_path)
    modality = str(modality_of(info.get("config", {}).get("modality")))
    rows = []
    for where, row in read_json_lines(manifest):
        ManifestRow.from_json(row, where)  # a bad row is refused, naming its line and field
        rows.append(_row(data, where, row, modality))  # fields as stored (older sets: theirs)
    if not rows:
        raise ValueError(f"{manifest}: no questions")
    text_answers = _answers_as_text(rows)
    schema = _schema(rows)
    bundled = _bundled_sha()
    cases = info.get("cases", [])
    all_bundled = bool(cases) and all(c.get("ct_sha256") in bundled for c in cases)
    licence = license or ("apache-2.0" if all_bundled else "other")
    groups = _shards(rows, int(max_shard_mb * 2**20))
    out = Path(out)
    made = (f"data/{SPLIT}-*.parquet", "a Hugging Face export")
    with staged(out, overwrite, {"--data": data}, made) as stage:
        (stage / "data").mkdir()
        shards = []
        for k, group in enumerate(groups):
            path = stage / "data" / f"{SPLIT}-{k:05d}-of-{len(groups):05d}.parquet"
            pq.write_table(pa.Table.from_pylist(group, schema=schema), path)
            shards.append(out / "data" / path.name)
        if any(c.get("ct_sha256") in bundled for c in cases):
            src = resources.files("radspatial.data") / _BUNDLED_LICENCE
            (stage / _BUNDLED_LICENCE).write_bytes(src.read_bytes())
        card = dataset_card(info, schema, rows, licence, name or data.resolve().name, bundled)
        if text_answers:
            card += "\n" + TEXT_ANSWERS_NOTE
        (stage / "README.md").write_text(card, encoding="utf-8")
    return HFExport(out, shards, len(rows), licence, schema.names)


_LICENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+\-]{0,63}")


def _dataset_info(path: Path) -> dict[str, Any]:
    """dataset.json, with the shapes the card reads checked (a ``DataFileError`` names the key)."""
    info = read_json(path, want=dict)
    for key, kind in (("cases", list), ("counts", dict), ("question_types", dict)):
        if not isinstance(info.get(key, kind()), kind):
            raise DataFileError(f"{path}: {key!r} must be {_KIND[kind]}")
    for i, case in enumerate(info.get("cases", [])):
        if not isinstance(case, dict):
            raise DataFileError(f"{path}: cases[{i}] must be an object")
    for key in ("counts", "question_types"):
        for name, c in info.get(key, {}).items():
            if not isinstance(c, dict) or not all(
                isinstance(c.get(f), int) and not isinstance(c.get(f), bool) for f in ("n", "yes")
            ):
                raise DataFileError(f"{path}: {key}[{name!r}] must hold integers n and yes")
    return info


_KIND = {list: "a list", dict: "an object"}


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def _type_name(t: Any) -> str:
    text = str(t)
    return "Image (PNG bytes)" if text.startswith("struct<bytes: binary") else text


def dataset_card(
    info: dict[str, Any],
    schema: Any,
    rows: list[dict[str, Any]],
    licence: str,
    name: str,
    bundled: set[str],
) -> str:
    """The README.md: YAML header (licence, task, size, the parquet config) and the card."""
    n_rows, modalities = len(rows), _modality_counts(rows)
    header = _card_header(licence, name, n_rows, sorted(modalities))
    counts = info.get("counts", {})
    types = info.get("question_types", {})
    lines = [
        f"# {md_text(name)}",
        "",
        f"Spatial yes/no questions on {'/'.join(sorted(modalities))} slices, generated by "
        f"radspatial {info.get('versions', {}).get('radspatial', '')} (MIRP-style setups "
        f"RQ1-RQ3 and the blank-image ablation AS), {n_rows} questions, one row each, "
        f"split `{SPLIT}`.",
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("parquet", data_dir="<this folder>/data", split="{SPLIT}")',
        "```",
        "",
        "## Counts",
        "",
        "| setup/marker | questions | yes |",
        "|---|---|---|",
        *(f"| {md_text(k)} | {c['n']} | {c['yes']} |" for k, c in sorted(counts.items())),
        "",
        "| modality | questions |",
        "|---|---|",
        *(f"| {md_text(m)} | {n} |" for m, n in sorted(modalities.items())),
        "",
        "| question type | questions | yes | chance |",
        "|---|---|---|---|",
        *(
            f"| {md_text(k)} | {c['n']} | {c['yes']} | {md_text(c.get('chance', ''))} |"
            for k, c in sorted(types.items())
        ),
        "",
        "## Columns",
        "",
        "Every field of radspatial's `manifest.jsonl` (see radspatial's docs/format.md): `answer` "
        "is the answer in the shown image, `answer_standard` in the un-rotated standard view, "
        "`answer_anatomical` in the patient's frame (MIRP's).",
        "",
        "| column | type |",
        "|---|---|",
        *(f"| `{f.name}` | {_type_name(f.type)} |" for f in schema),
        "",
        "## Licence and provenance",
        "",
        *_provenance(info, licence, bundled),
    ]
    return "\n".join(header + lines)


def _modality_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["modality"]] = counts.get(r["modality"], 0) + 1
    return counts


_MODALITY_TAGS = {"CT": "computed-tomography", "MR": "magnetic-resonance-imaging"}


def _card_header(licence: str, name: str, n_rows: int, modalities: list[str]) -> list[str]:
    return [
        "---",
        f"license: {licence}",
        f"pretty_name: {json.dumps(name)}",
        "task_categories:",
        "- visual-question-answering",
        "language:",
        "- en",
        "tags:",
        "- medical",
        *(f"- {_MODALITY_TAGS.get(m, m.lower())}" for m in modalities),
        "- spatial-reasoning",
        "- radspatial",
        "size_categories:",
        f"- {_size_category(n_rows)}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        f"  - split: {SPLIT}",
        f"    path: data/{SPLIT}-*.parquet",
        "---",
        "",
    ]


def _provenance(info: dict[str, Any], licence: str, bundled: set[str]) -> list[str]:
    """Licence line, one row per source CT (sha256, bundled or user data), generator config."""
    lines: list[str] = []
    if licence == "other":
        lines += [
            "**Licence not stated.** The images are derived from the source CTs below; their "
            "licence governs this dataset. Set it with `radspatial export hf --license ID`.",
            "",
        ]
    else:
        lines += [f"Licence: `{licence}`.", ""]
    lines += ["| case | CT | CT sha256 | mask sha256 | labels | source |", "|---" * 6 + "|"]
    for c in info.get("cases", []):
        origin = (
            "TotalSegmentator example CT, Apache-2.0 (see LICENSE.totalsegmentator)"
            if c.get("ct_sha256") in bundled
            else "user data"
        )
        labels = PurePath(str(c.get("labels") or "")).name  # a table's name, never its path
        cells = [c.get("case_id"), PurePath(str(c.get("ct", ""))).name]
        cells += [md_code(c.get("ct_sha256")), md_code(c.get("seg_sha256")), labels, origin]
        lines.append("| " + " | ".join(md_text(x) for x in cells) + " |")
    config = md_code(json.dumps(info.get("config", {}), sort_keys=True))
    lines += ["", f"Generator config (seed {md_text(info.get('seed'))}): {config}", ""]
    return lines
