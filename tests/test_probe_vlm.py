"""``radspatial probe vlm`` end to end on the tiny random LLaVA (tests/tiny_vlm.py: the real
transformers code path) and a tiny generated dataset: eval -> probe vlm -> report; plus the
folds (no group in two), the probes on features that hold the answer, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from radspatial.cli import main

STAGES = ("vision", "projector", "lm2")
CELLS = ("knows_right", "knows_wrong", "not_knows_right", "not_knows_wrong")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    import torch

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.core.runtime import bundled_example
    from radspatial.imaging.volumes import Case

    torch.set_num_threads(1)  # the tiny model is faster on one thread than on contended ones
    out = tmp_path_factory.mktemp("probe-vlm") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(
        seed=2, size=96, markers=("dots", "box"), as_count=2,
        question_types=("relative_position",),
    )  # fmt: skip
    build_dataset([Case("example_ct_sm", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Path:
    from shared_datasets import tiny_vlm

    model = tiny_vlm(tmp_path_factory, "llava")
    run = dataset.parent / "run"
    argv = ["eval", "--data", str(dataset), "--model", f"hf:{model}", "--out", str(run)]
    assert main([*argv, "--limit", "24", "--runs", "1", "--max-tokens", "2"]) == 0
    argv = ["probe", "vlm", "--run", str(run), "--split-by", "slice", "--layers", "-1"]
    assert main([*argv, "--epochs", "20", "--device", "cpu"]) == 0
    return run


def test_writes_rows_per_item_and_stage_tables_and_figure(probed: Path):
    out = probed / "probe_vlm"
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    results = [json.loads(x) for x in (probed / "results.jsonl").read_text().splitlines()]
    n = summary["n_items"]
    assert summary["architecture"] == "llava" and tuple(summary["stage_order"]) == STAGES
    assert 4 <= n <= 24 and len(rows) == n * (len(STAGES) + 1)
    assert {r["stage"] for r in rows} == {*STAGES, "answer"}
    right = {r["id"]: r["correct"] for r in results}
    for r in rows:  # joined item by item with the run's answers
        assert r["model_right"] == right[r["id"]]
        if r["stage"] != "answer":
            assert len(r["tokens"]["predictions"]) == 3  # three seeds
            assert r["tokens"]["right"] == (
                sum(p == r["target"] for p in r["tokens"]["predictions"]) >= 2
            )
    for stage in STAGES:
        for readout in ("pooled", "tokens"):
            s = summary["stages"][stage][readout]
            t = s["vs_answer"]
            assert sum(t[k] for k in CELLS) == n
            assert t["knows_right"] + t["knows_wrong"] == s["correct"]
            assert 0 <= t["mcnemar_p"] <= 1 and s["ci95"][0] <= s["accuracy"] <= s["ci95"][1]
            assert set(s["by"]) == {"setup", "marker", "view"}
            assert {"as", "rq3"} & set(s["by"]["setup"])
    assert summary["chance"] == 0.5 and "majority" in summary
    steps = summary["chain"]["tokens"]["steps"]
    assert [(s["from"], s["to"]) for s in steps] == [
        ("vision", "projector"), ("projector", "lm2"), ("lm2", "answer")
    ]  # fmt: skip
    assert (out / "stages.png").read_bytes()[:4] == b"\x89PNG"

    report = probed.parent / "report"
    assert main(["report", str(probed), "--out", str(report)]) == 0
    md = (report / "summary.md").read_text()
    assert "Where the model loses the relation (probe vlm)" in md
    assert "![probe_vlm_0.png](probe_vlm_0.png)" in md
    assert (report / "probe_vlm_0.png").is_file()
    assert 'src="probe_vlm_0.png"' in (report / "index.html").read_text()


@pytest.mark.parametrize("family", ["paligemma", "gemma3"])
def test_more_families_probed(family: str, dataset: Path, tmp_path_factory, tmp_path: Path):
    """PaliGemma (16 vision tokens, 16 image tokens) and Gemma 3 (16 vision tokens pooled by
    its projector to 4 image tokens: the encoder's grid is not the language model's)."""
    from shared_datasets import tiny_vlm

    model = tiny_vlm(tmp_path_factory, family)
    run = tmp_path / "run"
    argv = ["eval", "--data", str(dataset), "--model", f"hf:{model}", "--out", str(run)]
    assert main([*argv, "--limit", "12", "--runs", "1", "--max-tokens", "1"]) == 0
    argv = ["probe", "vlm", "--run", str(run), "--split-by", "slice", "--layers", "1"]
    assert main([*argv, "--epochs", "2", "--device", "cpu"]) == 0
    summary = json.loads((run / "probe_vlm" / "summary.json").read_text())
    assert summary["model_type"] == family and summary["architecture"] == "llava"
    assert summary["stage_order"] == ["vision", "projector", "lm1"]
    n = summary["n_items"]
    rows = (run / "probe_vlm" / "items.jsonl").read_text().splitlines()
    assert 4 <= n <= 12 and len(rows) == 4 * n
    for stage in summary["stage_order"]:
        t = summary["stages"][stage]["tokens"]["vs_answer"]
        assert sum(t[k] for k in CELLS) == n


def test_folds_never_split_a_group_and_probes_read_what_features_hold():
    from radspatial.probes.vlm_fit import FitOptions, ProbeItem, fit_stage, folds

    rng = np.random.default_rng(0)
    groups = [f"slice{k // 3}" for k in range(60)]
    for seed in (0, 1, 2):
        fold = folds(groups, seed)
        for g in set(groups):
            assert len({f for f, h in zip(fold, groups, strict=True) if h == g}) == 1
    targets = rng.integers(0, 2, 60)
    items = [ProbeItem(f"i{k}", groups[k], k % 2, int(t)) for k, t in enumerate(targets)]
    holds = rng.normal(size=(60, 8)) + 3.0 * targets[:, None]  # the target, plainly
    noise = rng.normal(size=(60, 8))
    preds = fit_stage(noise, holds, items, FitOptions(epochs=60))
    assert preds["tokens"].shape == (3, 60)
    assert (preds["tokens"] == targets).mean() > 0.9
    assert (preds["pooled"] == targets).mean() < 0.8
    with pytest.raises(ValueError, match="at least 2 groups"):
        folds(["one"] * 5, 0)


def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from radspatial.probes.vlm_extract import architecture

    model = SimpleNamespace(config=SimpleNamespace(model_type="idefics3"))
    with pytest.raises(ValueError, match="LLaVA-style and Qwen2-VL-style .* not 'idefics3'"):
        architecture(model, "hf:some/idefics")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("")
    (run / "run.json").write_text(json.dumps({"model": "baseline:yes", "data": str(tmp_path)}))
    assert main(["probe", "vlm", "--run", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "reads hf: models only" in err and len(err.splitlines()) == 1


def test_report_skips_a_malformed_probe_summary(tmp_path: Path):
    from radspatial.reports.probe import KIND, probe_markdown

    run = tmp_path / "run"
    (run / "probe_vlm").mkdir(parents=True)
    (run / "probe_vlm" / "summary.json").write_text(json.dumps({"kind": KIND, "stages": 3}))
    (run / "other").mkdir()
    (run / "other" / "summary.json").write_text(json.dumps({"kind": "something else"}))
    md = probe_markdown([run], tmp_path)
    assert "unreadable probe summary, skipped" in md and "other" not in md
    assert probe_markdown([tmp_path / "run" / "other"], tmp_path) == ""


def test_qwen2_vl_vision_tokens_come_back_in_row_major_order():
    """The merger reads 2x2 windows in turn (Qwen2-VL's patch order); the encoder stage puts
    them back on the image grid, so a token's index says where it is."""
    import torch

    from radspatial.probes.vlm_extract import StageReader

    h, w, m = 4, 6, 2
    grid = np.arange(h * w).reshape(h, w)
    merger_order = [grid[r * m + dr, c * m + dc] for r in range(h // m) for c in range(w // m)
                    for dr in range(m) for dc in range(m)]  # fmt: skip
    tokens = torch.tensor(merger_order, dtype=torch.float32)[:, None]
    reader = StageReader.__new__(StageReader)
    reader.kind, reader._visual = "qwen2_vl", SimpleNamespace(spatial_merge_size=m)
    inputs = {"image_grid_thw": torch.tensor([[1, h, w]])}
    flat = reader._vision(tokens, inputs, (h, w))
    assert flat[:, 0].tolist() == list(range(h * w))


def test_a_rerun_reuses_the_features_and_gives_the_same_numbers(probed: Path, capsys):
    """Issue 50, 5: the stages' features are kept (OUT/features.npz, keyed by what made them),
    so a rerun fits again without the model; seeded folds and one-thread fits give the same
    numbers; fewer folds for few items, said on the console and in summary.json."""
    out = probed / "probe_vlm"
    first = json.loads((out / "summary.json").read_text())
    assert first["n_folds"] == min(5, first["n_groups"], max(2, first["n_items"] // 12))
    argv = ["probe", "vlm", "--run", str(probed), "--split-by", "slice", "--layers", "-1"]
    capsys.readouterr()
    assert main([*argv, "--epochs", "20", "--device", "cpu", "--overwrite"]) == 0
    captured = capsys.readouterr()
    assert f"{out / 'features.npz'} (same model, items, layers)" in captured.err
    assert "loading hf:" not in captured.err
    assert f"probes: {first['n_folds']} folds of whole slice groups, seeds 0, 1, 2" in captured.out
    again = json.loads((out / "summary.json").read_text())
    assert again["stages"] == first["stages"] and again["majority"] == first["majority"]


def _cache_of(probed: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the probed run (its probe_vlm folder and features.npz inside)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(probed, run)
    return run, run / "probe_vlm" / "features.npz"


def _rewrite(path: Path, change) -> None:
    """features.npz with its arrays changed by ``change(dict)``, its key kept."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    with path.open("wb") as f:
        np.savez(f, **arrays)


def _first_stage(arrays: dict) -> str:
    return next(k for k in arrays if "|" in k)


def _fewer_rows(arrays: dict) -> None:
    k = _first_stage(arrays)
    arrays[k] = arrays[k][:-1]


def _nan(arrays: dict) -> None:
    k = _first_stage(arrays)
    arrays[k] = np.full_like(arrays[k], np.nan)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _fifo(path: Path) -> None:
    import os

    path.unlink()
    os.mkfifo(path)


def _compressed(path: Path) -> None:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    with path.open("wb") as f:
        np.savez_compressed(f, **arrays)


CACHES = [
    ("truncated", _truncate, "not a probe vlm features file"),
    ("garbage", lambda p: p.write_bytes(b"\x00garbage" * 100), "not a probe vlm features file"),
    ("a FIFO", _fifo, "not a regular file"),
    ("compressed", _compressed, "compressed members"),
    ("a row short", lambda p: _rewrite(p, _fewer_rows), "not one finite row for each of the 24"),
    ("NaN features", lambda p: _rewrite(p, _nan), "not one finite row for each of the 24"),
]


@pytest.mark.parametrize("name, spoil, words", CACHES, ids=[c[0] for c in CACHES])
def test_a_spoilt_features_file_is_one_line(name, spoil, words, probed, tmp_path, capsys):
    """OUT/features.npz that probe vlm did not write whole (cut, garbage, a FIFO, compressed,
    a row short or NaN under the right key): one line naming it, exit 2, nothing fitted; the
    folder it sits in is left as it was."""
    run, cache = _cache_of(probed, tmp_path)
    spoil(cache)
    before = sorted(p.name for p in cache.parent.iterdir())
    argv = ["probe", "vlm", "--run", str(run), "--split-by", "slice", "--layers", "-1"]
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--device", "cpu", "--overwrite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([x for x in err if "error:" in x]) == 1 and "Traceback" not in "".join(err)
    assert f"{cache}: " in err[-1] and words in err[-1], err[-1]
    assert sorted(p.name for p in cache.parent.iterdir()) == before


def test_every_config_field_is_a_flag_of_probe_vlm():
    """``probe vlm`` fills ``VlmProbeConfig`` from the flags of the same names: a field added
    to the config without its flag fails here, not at a user's run."""
    from dataclasses import fields

    from radspatial.cli import build_parser
    from radspatial.probes.vlm import VlmProbeConfig

    args = build_parser().parse_args(["probe", "vlm", "--run", "r"])
    missing = [
        f.name for f in fields(VlmProbeConfig) if f.name != "fit" and not hasattr(args, f.name)
    ]
    assert missing == []
