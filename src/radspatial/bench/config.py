"""What a ``radspatial generate`` run is asked to make: setups, markers, question types, image
size and window, thresholds, seed; validated on construction (each bad value a
``core.jobspec.ParamError``: named by its flag on the command line, its keyword in Python) and
recorded in ``dataset.json``."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from radspatial.core.jobspec import ParamError
from radspatial.core.modality import DEFAULT_MODALITY, MODALITIES, modality_sentence
from radspatial.core.records import DEFAULT_TYPE, SETUPS
from radspatial.imaging.markers import MARKER_TYPES, marker_names
from radspatial.imaging.planes import DEFAULT_PLANE, check_planes
from radspatial.questions import QuestionRules, get_question_type

CT_WINDOW = (400.0, 40.0)  # soft tissue, HU (MIRP's)
MAX_SIZE = 4096  # px: 7 RGB PNGs of 4096^2 per slice are already ~350 MB of pixels
PNG_LEVEL = 3


@dataclass(frozen=True)
class GenerateConfig:
    seed: int = 0
    size: int = 512
    # width, level in the volume's units; None: CT's soft-tissue window (HU), or on MR the
    # volume's own 1st-99th percentile (imaging.slices.percentile_window)
    window: tuple[float, float] | None = None
    setups: tuple[str, ...] = SETUPS
    markers: tuple[str, ...] = MARKER_TYPES
    as_count: int = 100
    rules: QuestionRules = field(default_factory=QuestionRules)
    question_types: tuple[str, ...] = (DEFAULT_TYPE,)
    group: bool | None = None  # None: MIRP grouping on for TotalSegmentator tables
    export_masks: bool = False
    # zlib level of the PNGs: 3 encodes a CT slice ~2.5x faster than Pillow's default 6 for
    # ~1% more bytes (benchmarks/bench_generate.py); same level, same bytes on every run
    png_level: int = PNG_LEVEL
    modality: str = DEFAULT_MODALITY  # CT | MR: the display default and the prompts' words
    planes: tuple[str, ...] = (DEFAULT_PLANE,)  # imaging/planes.py: axial, coronal, sagittal
    per_slice: int = 1  # questions per slice and type (each its own image, pair and variant)
    consistency: bool = False  # relative position in groups of 8 variants (bench/consistency)
    # all: every item, marked decidable or not; only: the items the image decides
    # (questions/decidability.py); landmarks: a handedness landmark table (None: built in)
    decidable: str = "all"
    landmarks: str | None = None

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ParamError(
                "modality",
                f"{{param}} must be one of {', '.join(MODALITIES)}, got {self.modality!r}",
            )
        if self.window is None and self.modality == DEFAULT_MODALITY:
            object.__setattr__(self, "window", CT_WINDOW)
        bad = set(self.setups) - set(SETUPS)
        if bad or not self.setups:
            raise ValueError(f"setups must be a non-empty subset of {SETUPS}, got {self.setups}")
        bad = set(self.markers) - set(marker_names())
        if bad or not self.markers:
            raise ValueError(f"markers must be a non-empty subset of {marker_names()}")
        if not 64 <= self.size <= MAX_SIZE:
            raise ParamError(
                "size", f"{{param}} must be between 64 and {MAX_SIZE} px, got {self.size}"
            )
        if self.window is not None and not all(math.isfinite(v) for v in self.window):
            raise ParamError("window", f"{{param}} must be finite numbers, got {list(self.window)}")
        if self.window is not None and self.window[0] <= 0:
            raise ValueError(f"window width must be > 0, got {self.window[0]}")
        for param, value in (
            ("min_distance", self.rules.min_distance_px),
            ("margin", self.rules.margin_px),
            ("size_tolerance", self.rules.size_tolerance),
            ("min_component", self.rules.min_component_px),
        ):
            if not math.isfinite(value) or value < 0:
                raise ParamError(param, f"{{param}} must be a finite number >= 0, got {value}")
        if not self.question_types or len(set(self.question_types)) != len(self.question_types):
            raise ValueError(
                f"question_types must be distinct and non-empty: {self.question_types}"
            )
        for name in self.question_types:
            get_question_type(name)  # unknown names fail here, naming the known ones
        if not isinstance(self.png_level, int) or not 0 <= self.png_level <= 9:
            raise ParamError("png_level", f"{{param}} must be 0..9, got {self.png_level}")
        check_planes(self.planes)
        if not isinstance(self.per_slice, int) or not 1 <= self.per_slice <= 16:
            raise ParamError("per_slice", f"{{param}} must be 1..16, got {self.per_slice}")
        if self.decidable not in ("all", "only"):
            raise ParamError("decidable", f"{{param}} must be all or only, got {self.decidable!r}")
        if self.landmarks is not None:
            from radspatial.questions.decidability import landmark_table

            try:  # a bad table is refused before any case is read
                landmark_table(self.landmarks)
            except (OSError, ValueError) as exc:
                raise ParamError("landmarks", f"{{param}}: {exc}") from None
        if self.as_count < 0 or self.as_count % 2:
            raise ValueError("as_count must be even and >= 0 (exactly half the answers are yes)")

    def to_json(self) -> dict:
        d = asdict(self)
        d["window"] = None if self.window is None else list(self.window)
        d["display"], d["prompt_words"] = display_rule(self), self.prompt_words
        d["setups"], d["markers"] = list(self.setups), list(self.markers)
        d["question_types"] = list(self.question_types)
        d["planes"] = list(self.planes)
        return d

    @property
    def prompt_words(self) -> str:
        """What the prompts call the image (``eval.prompts``), recorded in dataset.json."""
        return modality_sentence(self.modality)

    def combos(self) -> list[tuple[str, str]]:
        """(setup, marker) pairs for the slice setups, in output order."""
        out: list[tuple[str, str]] = []
        if "rq1" in self.setups:
            out.append(("rq1", "none"))
        for setup in ("rq2", "rq3"):
            if setup in self.setups:
                out += [(setup, m) for m in self.markers]
        return out


def display_rule(config: GenerateConfig) -> str:
    """How the slices' grey values were chosen, in words (recorded in dataset.json)."""
    if config.window is None:
        return "per-volume percentiles: black at the 1st, white at the 99th (all voxels)"
    unit = " HU" if config.modality == DEFAULT_MODALITY else ""
    return f"window width {config.window[0]:g}{unit}, level {config.window[1]:g}{unit}"
