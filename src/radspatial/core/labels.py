"""Label tables (TotalSegmentator v2, BTCV, AMOS, WORD, user JSON), MIRP grouping, display names.

Pure data and pure functions; importable without any heavy dependency.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from radspatial.core.errors import InputError
from radspatial.core.gates import file_text
from radspatial.core.textsafe import log_text

BUILTIN_TABLES = {
    "totalsegmentator": "totalsegmentator_v2_total.json",
    "totalsegmentator_mr": "totalsegmentator_v2_total_mr.json",
    "btcv": "btcv.json",
    "amos": "amos.json",
    "word": "word.json",
}

# MIRP merged TotalSegmentator's vertebrae into one structure and the ribs into one per side,
# reusing the first id of each block (see the MIRP dataset guide's structure table). The MR
# task ("total_mr") already labels the vertebrae as one class (19) and has no ribs: nothing to
# merge, and its tables are recorded as grouped the MIRP way all the same.
_MIRP_GROUPS: dict[str, tuple[tuple[range, int, str], ...]] = {
    "totalsegmentator": (
        (range(26, 51), 26, "vertebrae"),
        (range(92, 104), 92, "rib_left"),
        (range(104, 116), 93, "rib_right"),
    ),
    "totalsegmentator_mr": (),
}

_SIDES = ("left", "right")

# WORD's names that TotalSegmentator calls otherwise (by-name transfer, SPAR-Bench's Tables 3-4):
# WORD's "intestine" is the small bowel, its "adrenal_gland" one label for both sides, and its
# femur heads are the proximal part of TotalSegmentator's whole femurs (a superset)
WORD_TO_TOTALSEG: dict[str, tuple[str, ...]] = {
    "intestine": ("small_bowel",),
    "adrenal_gland": ("adrenal_gland_left", "adrenal_gland_right"),
    "femur_head_left": ("femur_left",),
    "femur_head_right": ("femur_right",),
}


def totalseg_names(word_name: str) -> tuple[str, ...]:
    """TotalSegmentator's name(s) for a WORD structure (the same name where they agree)."""
    return WORD_TO_TOTALSEG.get(word_name, (word_name,))


@dataclass(frozen=True)
class LabelTable:
    """id -> snake_case structure name, plus how ids were remapped (grouping)."""

    name: str
    names: dict[int, str]
    remap: dict[int, int] = field(default_factory=dict)  # source id -> id after grouping
    grouping: str | None = None

    def apply(self, label_id: int) -> int:
        return self.remap.get(label_id, label_id)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "grouping": self.grouping,
            "names": {str(k): v for k, v in sorted(self.names.items())},
        }


_ID = re.compile(r"[0-9]{1,9}")  # ASCII digits only: int() would also take "１" or " 1"


def _parse_table(raw: dict, source: str) -> dict[int, str]:
    """id -> normalized name; ids are plain ASCII decimals, each id once ("1" and "01" are
    the same id), and every name normalizes to a structure name (not empty like ``---``,
    not a bare side like ``left``)."""
    out: dict[int, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not _ID.fullmatch(key):
            raise ValueError(f"{source}: label id {key!r} is not an integer (ASCII digits)")
        label_id = int(key)
        if label_id <= 0:
            raise ValueError(f"{source}: label id {label_id} must be >= 1 (0 is background)")
        if label_id in out:
            raise ValueError(f"{source}: label id {label_id} is given twice (as {key!r})")
        name = normalize_name(value) if isinstance(value, str) else ""
        if not name:
            raise ValueError(f"{source}: label {label_id} has no name (got {value!r})")
        name = structure_name(value, source=source, field=f"label {label_id}'s name")
        if name in _SIDES:
            raise ValueError(f"{source}: label {label_id} is named only {name!r}, not a structure")
        out[label_id] = name
    return out


@cache
def _builtin(name: str) -> dict[int, str]:
    text = resources.files("radspatial.data").joinpath(BUILTIN_TABLES[name]).read_text()
    return _parse_table(json.loads(text), f"built-in table {name}")


def load_table(spec: str | Path | None, *, group: bool | None = None) -> LabelTable:
    """Load a built-in table by name or a JSON file ``{"1": "spleen", ...}``.

    A JSON file may extend a built-in table: ``{"extends": "totalsegmentator", "200": "mass"}``.
    ``group`` applies MIRP's vertebrae/rib grouping; ``None`` means on for TotalSegmentator's
    CT and MR tables (and tables extending them) and off otherwise (grouping is defined for
    TotalSegmentator ids).
    """
    spec = "totalsegmentator" if spec is None else str(spec)
    base = None
    if spec in BUILTIN_TABLES:
        names, table_name = dict(_builtin(spec)), spec
    else:
        from radspatial.core.datafiles import loads, read_text_bounded

        path = Path(spec)
        if not path.is_file():
            known = ", ".join(BUILTIN_TABLES)
            raise ValueError(f"{spec}: not a built-in label table ({known}) nor a JSON file")
        raw = loads(read_text_bounded(path), path)
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object id -> name")
        base = raw.pop("extends", None)  # {"extends": "totalsegmentator", "200": "mass"}
        if base is not None and (not isinstance(base, str) or base not in BUILTIN_TABLES):
            raise ValueError(f"{path}: extends {base!r}, not a built-in table")
        names = {**(_builtin(base) if base else {}), **_parse_table(raw, str(path))}
        table_name = str(path)
    family = next((t for t in (table_name, base) if t in _MIRP_GROUPS), None)
    if group is None:
        group = family is not None
    if not group:
        return LabelTable(table_name, names)
    if family is None:
        raise ValueError(
            f"{table_name}: vertebrae/rib grouping is defined only for {' and '.join(_MIRP_GROUPS)}"
        )
    remap: dict[int, int] = {}
    for ids, target, group_name in _MIRP_GROUPS[family]:
        for i in ids:
            remap[i] = target
            names.pop(i, None)
        names[target] = group_name
    return LabelTable(table_name, dict(sorted(names.items())), remap, grouping="mirp")


_NOT_VOCAB = re.compile(r"[^\w]+")  # the tables' names: words (any script) joined by "_"


def structure_name(text: object, *, source: object, field: str) -> str:
    """A structure name read from a file (a segment name, a label, a table entry) through the
    text gate (:func:`radspatial.core.gates.file_text`: bounded, no control characters;
    InputError naming the file and field), then into the label tables' vocabulary:
    ``"Liver (2)"`` -> ``liver_2``, ``"Left Kidney"`` -> ``kidney_left``."""
    name = normalize_name(file_text(text, source=source, field=field))
    name = _NOT_VOCAB.sub("_", name).strip("_")
    if not name:
        raise InputError(f"{source}: {field} {log_text(repr(text))} names no structure")
    return name


def normalize_name(name: str) -> str:
    """'Left Kidney', 'kidney-left', 'kidney_left' -> 'kidney_left' (TotalSegmentator style)."""
    words = [w for w in re.split(r"[\s_\-/]+", name.strip().lower()) if w]
    if words and words[0] in _SIDES and len(words) > 1:
        words = words[1:] + words[:1]
    return "_".join(words)


def display_name(name: str) -> str:
    """'kidney_left' -> 'left kidney'; 'inferior_vena_cava' -> 'inferior vena cava'.

    The side moves to the front, as in MIRP's questions, so MIRP tooling maps it back.
    """
    words = name.split("_")
    if len(words) > 1 and words[-1] in _SIDES:
        words = words[-1:] + words[:-1]
    return " ".join(words)


def letter_code(label_id: int) -> str:
    """MIRP's two-letter marker for a label id: 1 -> 'AA', 2 -> 'AB', 27 -> 'BA', 52 -> 'BZ'."""
    if not 1 <= label_id <= 26 * 26:
        raise ValueError(f"label id {label_id} has no two-letter code (1..676)")
    a, b = divmod(label_id - 1, 26)
    return chr(65 + a) + chr(65 + b)


def letter_to_id(code: str) -> int:
    code = code.strip().upper()
    if not re.fullmatch(r"[A-Z]{2}", code):
        raise ValueError(f"{code!r} is not a two-letter marker code")
    return (ord(code[0]) - 65) * 26 + (ord(code[1]) - 65) + 1


def side_of(name: str) -> str | None:
    """'left' / 'right' for paired structures, else None."""
    last = name.rsplit("_", 1)[-1]
    return last if last in _SIDES else None


def side_pairs(names: dict[int, str]) -> list[tuple[str, int, int]]:
    """(base name, left id, right id) of every structure labelled on both sides, by base name:
    {3: "kidney_left", 2: "kidney_right"} -> [("kidney", 3, 2)]."""
    sides: dict[str, dict[str, int]] = {}
    for label_id, name in names.items():
        side = side_of(name)
        if side:
            sides.setdefault(name[: -len(side) - 1], {})[side] = label_id
    return sorted((b, s["left"], s["right"]) for b, s in sides.items() if len(s) == 2)


MAX_UNNAMED_IDS = 3  # more mask ids than this without a name: the wrong table, not stray ids
SMALL_TABLE = 16  # BTCV (13), AMOS (15), WORD (16): a mask with more ids is not theirs


def table_misuse(present: set[int], table: LabelTable) -> str | None:
    """Why ``table`` is the wrong label table for a mask holding ids ``present`` (None: it
    fits): more than ``MAX_UNNAMED_IDS`` ids without a name, or more distinct ids than a small
    table has (a TotalSegmentator mask read as BTCV names id 5 "esophagus" where it is the
    liver). The message names the built-in table that fits best."""
    known = set(table.names) | set(table.remap)
    ids = present - {0}
    unnamed = sorted(ids - known)
    small = len(table.names) <= SMALL_TABLE and len(ids) > SMALL_TABLE
    if len(unnamed) <= MAX_UNNAMED_IDS and not small:
        return _numbers_its_own(present, table)
    fits = {n: len(ids - set(_builtin(n))) for n in BUILTIN_TABLES}
    likely = min(fits, key=lambda n: (fits[n], n != "totalsegmentator"))
    shown = ", ".join(map(str, unnamed[:8])) + (" ..." if len(unnamed) > 8 else "")
    why = (
        f"{len(unnamed)} of its {len(ids)} label ids have no name in table {table.name} ({shown})"
        if unnamed
        else f"it holds {len(ids)} label ids, more than table {table.name} has"
    )
    hint = f"likely table: {likely} (--labels {likely})" if likely != table.name else ""
    return f"{why}; {hint or 'is it the right mask?'}"


FEW_IDS = 8  # a mask numbering its own few structures 1..n


def _numbers_its_own(present: set[int], table: LabelTable) -> str | None:
    """A large table on a mask that holds only ids 1..n for a few n (3 to ``FEW_IDS``): the
    mask numbers its own structures and the table would name them wrong (``--labels
    totalsegmentator_mr`` on 4 labels reads spleen, kidneys, gallbladder). No TotalSegmentator
    output holds exactly its first n ids (a view with spleen, kidneys and gallbladder holds the
    liver, the spine, the muscles), so this is refused; a JSON table naming those ids passes."""
    ids = sorted(present - {0})
    if not 3 <= len(ids) <= FEW_IDS or len(table.names) <= SMALL_TABLE:
        return None  # one or two ids: a binary or two-structure mask, too common to doubt
    if ids != list(range(1, len(ids) + 1)):
        return None
    named = log_text(", ".join(f"{i}={table.names.get(table.apply(i), '?')}" for i in ids))
    return (
        f"the mask holds only label ids 1..{len(ids)}, which table {table.name} reads as "
        f"{named}; the mask numbers its own structures: give its table with --labels "
        "(a JSON file naming its ids)"
    )


# TotalSegmentator v1 labelled the heart as five structures (v2 has one, "heart"); structure
# sets written from v1 output carry these names. Name-matched masks (RTSTRUCT) read with the
# totalsegmentator table accept them as their own structures at ids after v2's last (117).
TOTALSEG_V1_HEART = {
    118: "heart_myocardium",
    119: "heart_atrium_left",
    120: "heart_ventricle_left",
    121: "heart_atrium_right",
    122: "heart_ventricle_right",
}


# a structure a model may know only as its parts (a network trained on v1's heart): the whole
# is the union of the parts' pixels (the agent answers "the heart" from them)
COMPOSITES: dict[str, tuple[str, ...]] = {"heart": tuple(TOTALSEG_V1_HEART.values())}


@cache
def composite_ids() -> dict[str, tuple[int, tuple[int, ...]]]:
    """Each :data:`COMPOSITES` whole's name -> (its id in the grouped TotalSegmentator table,
    its parts' ids there, v1's heart ids included); read once."""
    table = with_v1_heart(load_table("totalsegmentator", group=True))
    ids = {n: i for i, n in table.names.items()}
    return {
        w: (ids[w], tuple(ids[p] for p in parts if p in ids)) for w, parts in COMPOSITES.items()
    }


def with_v1_heart(table: LabelTable) -> LabelTable:
    """``table`` (a totalsegmentator table) plus :data:`TOTALSEG_V1_HEART` where neither the id
    nor the name is taken."""
    taken = set(table.names.values())
    used = set(table.names) | set(table.remap)
    extra = {k: v for k, v in TOTALSEG_V1_HEART.items() if k not in used and v not in taken}
    return LabelTable(table.name, {**table.names, **extra}, table.remap, table.grouping)
