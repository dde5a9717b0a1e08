"""Question types: one module per type, one registry.

A question type turns what one slice shows (:class:`SliceFacts`) into one yes/no question with
a chosen answer (the generator balances answers by asking for yes or no), and words it for each
setup: RQ1 names only, RQ2 names with markers, RQ3 markers only. Relative position is MIRP's
type; orientation, symmetry, size, distance and count are the SPAR Level 3 probes posed as
questions (SPAR-VQA). Every binary type is balanced, so its chance level is 50%; the open types
answer with a word or a number (``questions/open_common.py``).

A type owns everything about its questions (:class:`QuestionType`): proposing and wording them
(the generator), its in-context example (``eval/prompts.py``), its parse patterns, the roles of
the structures it names and its decision from what the agent's localizer found (``agent/``),
and what typical anatomy says about it (``models/baselines.py``). The generic code asks the
type through :data:`QUESTION_TYPES`, which imports every public module of this package the
first time it is used: a new type is one new module.
"""

from __future__ import annotations

import pkgutil
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from radspatial.core.answers import YES_NO, Answer, Grade
from radspatial.core.datafiles import answer01, one_of
from radspatial.core.registry import Registry
from radspatial.core.rules import QuestionRules
from radspatial.imaging.markers import marker_style
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.questions.guesses import Guesses
from radspatial.questions.records import Candidate, Decision, Example, PriorInput
from radspatial.questions.yesno_reading import parse_answer

if TYPE_CHECKING:  # the records and the parser's view of a question, for annotations
    from radspatial.questions.parsing import Asked
    from radspatial.questions.records import Context, Found, ParsedQuestion, Ref, Scene

__all__ = ["Example", "PriorInput", "QuestionRules"]  # re-exported: homes in records, rules
T = TypeVar("T")

# the CLI's groups (``--questions spar|spar-binary|open``) as their types declare them
# (``group``); read from the registry when first asked: see ``__getattr__`` at the end.
# spar: SPAR-VQA as SPAR-Bench's Table 2 (questions/spar_*.py); spar-binary: the earlier
# all-yes/no SPAR-VQA types; open: a word or a number as the answer
_GROUP_NAMES = {"SPAR_VQA": "spar-binary", "SPAR_TABLE2": "spar", "OPEN": "open"}


@dataclass(frozen=True)
class SliceFacts:
    """What a question type may look at in one slice.

    ``candidates``: structures that can carry a marker (one component, large enough, unique).
    ``component_areas(label_id)``: areas (output px, largest first) of a label's 8-connected
    components in the rendered output-size label image; used by ``count``.
    """

    variant: str
    size: int
    candidates: tuple[Candidate, ...]
    present: tuple[Candidate, ...] = ()  # every named structure in the slice (any components)
    component_areas: Callable[[int], list[float]] | None = None
    plane: str = DEFAULT_PLANE  # imaging/planes.py: what the standard view's axes mean anatomically


class MirrorReading(NamedTuple):
    """What a type re-reads its answer from (``QuestionType.mirrored_answer``): the question's
    objects as the mirror reading sees them, the slice and the thresholds."""

    objects: Sequence[Candidate]
    facts: SliceFacts
    rules: QuestionRules


@dataclass(frozen=True)
class QuestionSpec:
    """What was asked, independent of how it is worded for a setup/marker.

    Three frames: ``answer`` for the shown image; ``answer_standard`` for the same words asked
    of the un-rotated, un-flipped radiological image; ``answer_anatomical`` in the patient's
    frame (MIRP's anatomical truth: "left" is the patient's left), None where a type has none.
    """

    question_type: str
    objects: tuple[Candidate, ...]
    relation: str
    answer: int | str  # 0/1; open types: the canonical text or integer
    answer_standard: int | str | None
    params: dict[str, Any] = field(default_factory=dict)  # e.g. {"n": 3} for count
    answer_anatomical: int | str | None = None


@dataclass(frozen=True)
class Wording:
    """How each object is referred to in one setup: display names and/or marker references."""

    setup: str  # rq1 | rq2 | rq3
    marker: str  # none, or a marker style's name (numbers | letters | dots | ...)
    names: tuple[str, ...]  # display names ("left kidney")
    marks: tuple[str, ...]  # marker texts ("12", "BZ", "red"); empty for rq1

    def ref(self, k: int) -> str:
        """'the liver', 'the liver (12)', 'the number 12', 'the letters BZ', 'the red dot'."""
        if self.setup == "rq1":
            return f"the {self.names[k]}"
        if self.setup == "rq2":
            return f"the {self.names[k]} ({self.named(k)})"
        return marker_ref(self.marker, self.marks[k])

    def named(self, k: int) -> str:
        """An RQ2 parenthetical: the mark as its style words it there ("12", "outlined in red")."""
        return marker_style(self.marker).named.format(self.marks[k])

    def verb(self, k: int) -> str:
        """'Are' before 'the letters BZ' (MIRP's wording), else 'Is' (any k: one marker type)."""
        return marker_style(self.marker).verb if self.setup == "rq3" else "Is"

    def thing(self, k: int) -> str:
        """A structure phrase: named, or 'the structure marked by the number 12' in RQ3."""
        if self.setup == "rq3":
            return f"the structure marked by {marker_ref(self.marker, self.marks[k])}"
        return self.ref(k)


def yes_no(answer: int | str) -> str:
    """A yes/no type's answer in words: 1/0 as "yes"/"no", anything else as it is."""
    return {1: "yes", 0: "no"}.get(answer, str(answer)) if isinstance(answer, int) else answer


def marker_ref(kind: str, text: str) -> str:
    """'the number 12', 'the letters BZ', 'the red dot': the marker style's phrase."""
    return marker_style(kind).ref(text)


class QuestionType(Guesses, ABC):
    """What a question type provides: the generator's proposal and wording, the agent's parse
    and decision, the prior, and its scoring (``answer_kind``, ``read_reply``, ``canonical``,
    ``accepted_forms``, ``chance``). ``name`` and ``choose_variant`` must be defined
    (:class:`KeepVariant` keeps the variant; ``register_question_type`` refuses anything else),
    and a generated type defines ``propose`` and ``text``; the rest have defaults: every setup,
    a yes/no answer, no agent support, no prior, no group, none of MIRP's traits."""

    name: str
    n_objects: int  # objects that carry markers (0 for orientation)
    setups: tuple[str, ...] = ("rq1", "rq2", "rq3")  # which of rq1/rq2/rq3 it can be asked in
    chance: float | None = 0.5  # accuracy of a random guess (0.5: binary, balanced)
    example: Example | None = None  # its fixed in-context example (None: prompts refuse it)
    # scoring: the kind of its answers (core/answers.py: yes/no, choice, count, name, or a new
    # kind of its own) and the classes it balances over (empty: binary, or per item)
    answer_kind: str = YES_NO
    classes: tuple = ()
    # the agent: what its parser returns (empty: the agent does not parse its questions), the
    # role of each parsed structure, and where its patterns come in the parser's order
    relations: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    parse_order: int = 50
    relation_words: re.Pattern | None = None  # words that make a prompt's sentence its question
    # the CLI group it belongs to ("spar", "open"; empty: none) and its place in the group's
    # order, which is the order ``--question-types <group>`` generates in
    group: str = ""
    group_order: int = 50
    # the agent: ``verify`` weighs each localization's ``Found.uncertainty_px``, so a
    # localization flagged only as uncertain (``details["uncertain_reason"]``) is decided on
    # rather than abstained on; types that leave it False abstain on such a flag
    weighs_uncertainty: bool = False
    # MIRP's own type (relative position): MIRP's files and protocol, its statistics, the
    # headline, the blank-image (AS) ablation, 8-variant consistency groups, and image files
    # without a type suffix. One registered type has it.
    mirp_type: bool = False
    # decidability (questions/decidability.py): the answer is the view's handedness itself
    # (orientation), so only a landmark decides it; other types re-read their answer with the
    # sided structures read as their partners (``mirrored_answer``)
    reads_handedness: bool = False

    @property
    def open_answer(self) -> bool:
        """Answered by a word or a number (any kind but yes/no)."""
        return self.answer_kind != YES_NO

    @property
    def n_balanced(self) -> int:
        """How many answers the generator balances over in a block: the classes, 2 for yes/no,
        1 for an open type without classes (identification: whatever the marker sits on)."""
        return len(self.classes) or (1 if self.open_answer else 2)

    def item_chance(self, params: Mapping[str, Any]) -> float | None:
        """Chance on one item (default: the type's ``chance``; a type without one says it from
        the item's ``params``)."""
        return self.chance

    def tally(self, counts: dict[str, Any], answer: Any) -> None:
        """dataset.json's count of one answer: yes/no types count their yeses, open types each
        class (``classes``: answer -> items)."""
        if self.open_answer:
            classes = counts.setdefault("classes", {})
            classes[str(answer)] = classes.get(str(answer), 0) + 1
        else:
            counts["yes"] += answer

    def tally_decidable(self, counts: dict[str, Any], answer: Any) -> None:
        """dataset.json's count of a decidable item's answer (``decidability``): yes/no types
        count their yeses (``decidable_yes``: is the decidable subset still balanced?), open
        types nothing."""
        if not self.open_answer:
            counts["decidable_yes"] = counts.get("decidable_yes", 0) + int(answer)

    @abstractmethod
    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        """The rotation/flip variant to show (most types keep the pair's ``default``)."""

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        """One question whose shown-frame answer is ``target``, or None if the slice has none
        (default: none; a type the agent only answers generates no questions)."""
        return None

    def mirrored_answer(self, spec: QuestionSpec, seen: MirrorReading) -> Any:
        """The shown-frame answer ``spec`` would have about ``seen.objects`` in its place (the
        same slice, each sided structure read as its partner: ``questions/decidability.py``),
        or None where the type cannot say (default; its side-dependent items are then
        unknown)."""
        return None

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        """The question as asked (a type that proposes questions must word them)."""
        raise TypeError(f"question type {self.name!r} proposes questions it cannot word")

    def parse(self, asked: Asked) -> ParsedQuestion | None:
        """The question parsed (``questions/parsing.py`` offers its parts), None if it is not one of
        this type's; raises ParseError for one of its wordings that cannot be answered."""
        return None

    def to_locate(self, parsed: ParsedQuestion, context: Context) -> list[Ref]:
        """What the localizer should find (default: the parsed refs)."""
        return list(parsed.refs)

    def found_json(self, refs: Sequence[Ref], found: Sequence[Found | None]) -> Any:
        """What was found, for the agent's trace (default: one entry per ref)."""
        return [None if f is None else f.to_json() for f in found]

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        """The agent's decision from what was found (thresholds: ``scene.rules``); default: no
        geometric rule, the agent abstains (a type that parses should define one)."""
        return Decision(None, f"no rule to decide {parsed.kind} questions", "none")

    def prior(self, given: PriorInput) -> int | str | None:
        """What typical anatomy (or the standard view) answers, None where it says nothing."""
        return None

    def shown(self, answer: int | str) -> str:
        """1/0 as "yes"/"no" (the open types override: a count of 1 is not "yes")."""
        return yes_no(answer)

    def check_answer(self, value: Any, where: str, key: str = "answer") -> int | str:
        """A data file's answer as this type holds it (0/1 for yes/no; one of ``classes``),
        else a ``DataFileError`` naming ``where``."""
        if self.classes:
            return one_of(value, tuple(self.classes), where, key)
        return answer01(value, where, key)

    # --- scoring: the type is its own scorer (read, canonical form, judge forms) ---

    def read_reply(self, reply: str | None, question: str | None = None) -> Grade:
        """A model's reply read as an answer of this type (default: the yes/no reading)."""
        value = parse_answer(reply, question)
        if value is None:
            return Grade(None, "invalid", "no yes/no answer")
        return Grade(Answer(YES_NO, value), "answer", "yes/no")

    def canonical(self, value: Any) -> Answer | None:
        """A reference answer (a manifest's) in the form replies are read into."""
        return None if value is None else Answer(self.answer_kind, value)

    def accepted_forms(self, expected: Any) -> str:
        """Other forms of the reference answer the judge should accept ("(none)": none)."""
        return "(none)"

    def grade(self, reply: str | None, expected: Any, question: str | None = None) -> Grade:
        """The reply read and compared with ``expected`` (``Grade.graded``)."""
        return self.read_reply(reply, question).graded(self.canonical(expected))

    def metric_hooks(self) -> tuple[str, ...]:
        """The metrics its rows add to a group beside accuracy: names of ``eval/metric_hooks``'
        hooks (default: ``yes_no``, F1 and the yes rate, for a yes/no type; none for an open
        one). A plugin type adds its own by registering a hook and naming it here."""
        return default_metric_hooks(self.answer_kind)


TypeDefaults = QuestionType  # the name older plugins derive from (the optional members)


class KeepVariant(QuestionType):
    """The question does not depend on which variant is shown."""

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        return default


def pick(options: Sequence[Any], rng: np.random.Generator) -> Any:
    """One of ``options`` at random: one draw of ``rng.integers`` (every type draws so)."""
    return options[int(rng.integers(len(options)))]


def pairs(items: Sequence[T]) -> Iterator[tuple[T, T]]:
    """Every unordered pair, in order: (0, 1), (0, 2), ..., (1, 2), ... (candidates, points)."""
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            yield a, b


def _builtin_modules() -> tuple[str, ...]:
    """Every public module of this package (a type registers itself when imported; helpers
    such as ``open_common`` register nothing); private ``_name`` modules are skipped."""
    found = pkgutil.iter_modules(__path__)
    return tuple(f"{__name__}.{m.name}" for m in found if not m.name.startswith("_"))


QUESTION_TYPES: Registry[QuestionType] = Registry("question type", _builtin_modules())


def register_question_type(qt: QuestionType) -> QuestionType:
    if not isinstance(qt, QuestionType) or not isinstance(getattr(qt, "name", None), str):
        raise TypeError(
            f"a question type derives from questions.QuestionType and has a name: {qt!r}"
        )
    kind = type(qt)
    if kind.propose is not QuestionType.propose and kind.text is QuestionType.text:
        raise TypeError(f"question type {qt.name!r} proposes questions: it must define text()")
    return QUESTION_TYPES.add(qt.name, qt)


def get_question_type(name: str) -> QuestionType:
    return QUESTION_TYPES.get(name)


def list_question_types() -> list[str]:
    return QUESTION_TYPES.names()


def chance_levels() -> dict[str, float | None]:
    """Chance per type; None where it depends on the item (identification: see its module)."""
    return {k: v.chance for k, v in QUESTION_TYPES.items()}


def answer_classes(name: str) -> tuple:
    """The answer classes an open type balances over (empty: binary, or not balanced)."""
    return tuple(get_question_type(name).classes)


def check_answer(value: Any, question_type: str | None, where: str, key: str = "answer") -> Any:
    """The answer of a data file's row of ``question_type`` as its type checks it (0/1 for
    yes/no types and names no type claims); anything else is a ``DataFileError``."""
    if question_type and question_type in QUESTION_TYPES:
        return QUESTION_TYPES.get(question_type).check_answer(value, where, key)
    return answer01(value, where, key)


def answer_kind(question_type: str | None) -> str:
    """The kind of answer a type's questions take (``core/answers.py``); yes/no for a row
    without a type or with a name no type claims (read as MIRP's yes/no questions)."""
    if question_type is None or question_type not in QUESTION_TYPES:
        return YES_NO
    return QUESTION_TYPES.get(question_type).answer_kind


def tally_text(counts: Mapping[str, Any]) -> str:
    """dataset.json's count of one group of questions (``QuestionType.tally``) as generate
    prints it: "30 questions, 15 yes / 15 no (+42 open)", or an open type's spread of answers
    ("12 questions, 1: 4, 2: 4, 3: 4")."""
    classes: Mapping[str, int] = counts.get("classes") or {}
    if classes and not counts["yes"]:
        spread = ", ".join(f"{k}: {v}" for k, v in sorted(classes.items())[:6])
        return f"{counts['n']:>5} questions, {spread}{' ...' if len(classes) > 6 else ''}"
    n_open = sum(classes.values())
    tail = f" (+{n_open} open)" if n_open else ""
    yes, no = counts["yes"], counts["n"] - n_open - counts["yes"]
    return f"{counts['n']:>5} questions, {yes} yes / {no} no{tail}"


def default_metric_hooks(kind: str) -> tuple[str, ...]:
    """The metric hooks of answers of ``kind`` (``eval/metric_hooks``): F1 and the yes rate
    (``yes_no``) for yes/no, none for the others."""
    return ("yes_no",) if kind == YES_NO else ()


def metric_hooks_of(question_type: str, kind: str) -> tuple[str, ...]:
    """The metric hooks of a row of ``question_type`` whose answers are of ``kind``: its type's
    (``QuestionType.metric_hooks``), or for a name no type claims the default of ``kind``."""
    if question_type in QUESTION_TYPES:
        return QUESTION_TYPES.get(question_type).metric_hooks()
    return default_metric_hooks(kind)


def mirp_type_names() -> frozenset[str]:
    """The registered types with MIRP's trait (``QuestionType.mirp_type``: relative position)."""
    return frozenset(name for name, qt in QUESTION_TYPES.items() if qt.mirp_type)


def mirp_type_name() -> str:
    """The one type that asks MIRP's questions (its blank images, its consistency groups)."""
    names = sorted(mirp_type_names())
    if len(names) != 1:
        raise ValueError(f"expected one question type with MIRP's trait, found {names}")
    return names[0]


def is_mirp_type(question_type: str | None) -> bool:
    """Whether rows of ``question_type`` are MIRP's own questions (a row without a type is;
    a name no type claims is not)."""
    if question_type is None:
        return True
    return question_type in QUESTION_TYPES and QUESTION_TYPES.get(question_type).mirp_type


def agent_types() -> list[QuestionType]:
    """The types the agent parses, in the order their patterns are tried."""
    types = [qt for _, qt in QUESTION_TYPES.items() if qt.relations]
    return sorted(types, key=lambda qt: qt.parse_order)


def question_groups() -> dict[str, tuple[str, ...]]:
    """group -> its types' names in the group's order (``group_order``, then name), as the
    registered types declare them: a new type joins a group by saying so."""
    members: dict[str, list[QuestionType]] = {}
    for _, qt in QUESTION_TYPES.items():
        if group := qt.group:
            members.setdefault(group, []).append(qt)
    return {
        group: tuple(qt.name for qt in sorted(types, key=lambda qt: (qt.group_order, qt.name)))
        for group, types in sorted(members.items())
    }


def __getattr__(name: str) -> tuple[str, ...]:
    """``SPAR_VQA``, ``SPAR_TABLE2`` and ``OPEN``: the "spar-binary", "spar" and "open"
    groups, read when asked."""
    if name in _GROUP_NAMES:
        return question_groups().get(_GROUP_NAMES[name], ())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
