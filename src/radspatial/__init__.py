"""radspatial: spatial-reasoning benchmarks, evaluation, agents and probes for CT.

The Python API (docs/python_api.md), each name imported on first use so ``import radspatial``
stays instant:

- ``generate(out, ...)``: a MIRP-style benchmark from CT + organ masks (or the bundled CT);
- ``evaluate(data, model, out, ...)``: one model on a dataset, results in a run folder;
- ``report(runs, out)``: tables, figures and the browsable ``index.html``;
- ``spar_table(runs, out)``: SPAR-VQA over dataset seeds as SPAR-Bench's Table 2;
- ``Agent(localizer)``: the modular agent (``.answer(image, question)``); ``answer(image,
  question, ...)``: one answer, as ``radspatial agent``; ``serve(...)``: as ``radspatial serve``;
  ``train_unet(data, out, ...)``: as ``radspatial train unet``;
- ``phantom(out, ...)`` (as ``radspatial phantom``; ``write_phantoms`` underneath), ``mirror_case``:
  synthetic and counterfactual cases;
- ``probe_build``, ``probe_train``, ``probe_eval``, ``probe_table``: SPAR encoder probes, with
  ``radspatial probe``'s options (``build_probes``, ``train_probe``, ``evaluate_probe``: the
  library functions underneath);
- ``export_mirp``, ``export_hf``, ``export_lmms``: MIRP's layout, Hugging Face datasets,
  lmms-eval tasks; ``import_lmms``, ``import_inspect``: other tools' logs as run folders;
- ``parse_answer``, ``bundled_example``.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"

_LAZY = {
    "generate": "radspatial.api:generate",
    "evaluate": "radspatial.api:evaluate",
    "report": "radspatial.api:report",
    "EvalRun": "radspatial.api:EvalRun",
    "export_hf": "radspatial.api:export_hf",
    "export_lmms": "radspatial.api:export_lmms",
    "import_lmms": "radspatial.api:import_lmms",
    "import_inspect": "radspatial.api:import_inspect",
    "export_mirp": "radspatial.api:export_mirp",
    "spar_table": "radspatial.api:spar_table",
    "Agent": "radspatial.agent.pipeline.agent:Agent",
    "answer": "radspatial.api:answer",
    "serve": "radspatial.api:serve",
    "train_unet": "radspatial.api:train_unet",
    "probe_build": "radspatial.api:probe_build",
    "probe_train": "radspatial.api:probe_train",
    "probe_eval": "radspatial.api:probe_eval",
    "phantom": "radspatial.api:phantom",
    "write_phantoms": "radspatial.phantoms:write_phantoms",
    "mirror_case": "radspatial.api:mirror_case",
    "build_probes": "radspatial.probes.build:build_probes",
    "train_probe": "radspatial.probes.train:train_probe",
    "evaluate_probe": "radspatial.probes.evaluate:evaluate_probe",
    "probe_table": "radspatial.api:probe_table",
    "parse_answer": "radspatial.eval.scoring:parse_answer",
    "bundled_example": "radspatial.core.runtime:bundled_example",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'radspatial' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(import_module(module), attr)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
