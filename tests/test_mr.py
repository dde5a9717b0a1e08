"""MR benchmarks: the total_mr label table, percentile display, MR in every record and prompt,
the mask oracle on MR, the organ localizer's refusal, the report's modality breakdown.

Real data: TotalSegmentator's MR example (``totalseg_mr``, LPS, 117 x 91 x 20, 3 mm).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from radspatial.bench.config import GenerateConfig
from radspatial.bench.dataset import build_dataset
from radspatial.core.labels import load_table
from radspatial.imaging.slices import percentile_window, window_to_uint8
from radspatial.imaging.volumes import Case, load_case

MR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "totalseg_mr"
MR_CT, MR_SEG = MR / "example_mr_sm.nii.gz", MR / "example_seg_mr.nii.gz"
pytestmark = pytest.mark.skipif(not MR.is_dir(), reason="../shared/data not present")
LIVER, SPLEEN, VERTEBRAE = 5, 1, 19
MRI_SENTENCE = "The image is a 2D axial slice of an abdominal MRI scan. "
CT_SENTENCE = "The image is a 2D axial slice of an abdominal CT scan with soft tissue windowing. "


def test_total_mr_table_is_built_in_with_its_own_ids():
    table = load_table("totalsegmentator_mr")
    assert table.names[LIVER] == "liver" and table.names[VERTEBRAE] == "vertebrae"
    assert table.grouping == "mirp" and table.remap == {}  # vertebrae already one class
    assert load_table("totalsegmentator_mr", group=False).grouping is None
    assert load_table("totalsegmentator").names[5] == "liver"  # CT: 5 is the liver as well
    assert load_table("totalsegmentator").names[19] != "vertebrae"


def test_mr_volume_loads_in_ras_with_organs_where_they_belong():
    vol = load_case(Case("mr", MR_CT, MR_SEG, "totalsegmentator_mr"))
    assert vol.source["ct_orientation"] == "LPS" and vol.ct.shape == (117, 91, 20)

    def centre(label: int) -> np.ndarray:
        ijk = np.array(np.nonzero(vol.seg == label)).mean(axis=1)
        return (vol.affine @ [*ijk, 1.0])[:3]

    liver, spleen, spine = centre(LIVER), centre(SPLEEN), centre(VERTEBRAE)
    assert liver[0] > spine[0] > spleen[0]  # RAS: patient's right is +x
    assert spine[1] < liver[1]  # the spine is posterior
    assert vol.ct[vol.seg == VERTEBRAE].mean() > vol.ct[vol.seg == LIVER].mean()


def test_percentile_window_maps_p1_to_black_and_p99_to_white():
    rng = np.random.default_rng(0)
    vol = rng.uniform(100, 200, size=(20, 20, 10)).astype(np.float32)
    vol[0, 0, 0], vol[1, 1, 1] = -5000.0, 1e6  # outliers do not stretch the window
    width, level = percentile_window(vol)
    lo, hi = np.percentile(vol, [1, 99])
    assert width == pytest.approx(hi - lo, abs=1e-3) and level == pytest.approx(
        (hi + lo) / 2, abs=1e-3
    )
    gray = window_to_uint8(np.array([lo, hi, (lo + hi) / 2, 1e6, -5000.0]), width, level)
    assert gray[[0, 1, 3, 4]].tolist() == [0, 255, 255, 0] and gray[2] in (127, 128)
    with pytest.raises(ValueError, match="constant"):  # blank slices: refused, not shown
        percentile_window(np.full((4, 4, 4), 7.0))


def test_config_window_defaults_follow_the_modality():
    assert GenerateConfig().window == (400.0, 40.0) and GenerateConfig().modality == "CT"
    mr = GenerateConfig(modality="MR")
    assert mr.window is None and "percentiles" in mr.to_json()["display"]
    assert GenerateConfig(modality="MR", window=(500.0, 250.0)).window == (500.0, 250.0)
    with pytest.raises(ValueError, match="--modality"):
        GenerateConfig(modality="PET")


def _run(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "radspatial.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_cli_generate_mr_records_mr_everywhere(tmp_path):
    """The issue's command: MR in every record, percentile display, balanced answers."""
    out = tmp_path / "mr"
    res = _run(
        *("generate", "--ct", str(MR_CT), "--seg", str(MR_SEG)),
        *("--labels", "totalsegmentator_mr", "--modality", "mr", "--out", str(out)),
    )
    assert res.returncode == 0, res.stderr
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["config"]["prompt_words"] == MRI_SENTENCE
    assert meta["config"]["window"] is None and meta["config"]["modality"] == "MR"
    case = meta["cases"][0]
    assert case["modality"] == "MR" and case["labels"] == "totalsegmentator_mr"
    width, level = case["window"]
    assert 400 < width < 900 and 0 < level < width  # the volume's own p1-p99
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert rows and all(r["modality"] == "MR" for r in rows)
    rq1 = [r for r in rows if r["setup"] == "rq1"]
    assert len(rq1) >= 10 and 2 * sum(r["answer"] for r in rq1) == len(rq1)
    names = {o["name"] for r in rq1 for o in (r["object1"], r["object2"])}
    assert "liver" in names


def test_cli_mr_needs_its_own_volume(tmp_path):
    res = _run("generate", "--modality", "mr", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "bundled example is a CT" in res.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An MR and a CT dataset (RQ1, masks) and the mask oracle's run on each."""
    from radspatial.eval.runner import EvalConfig, run_eval

    root = tmp_path_factory.mktemp("mr_runs")
    out = {}
    cases = {
        "MR": Case("mr", MR_CT, MR_SEG, "totalsegmentator_mr"),
        "CT": Case("ct", *_bundled(), "totalsegmentator"),
    }
    for modality, case in cases.items():
        config = GenerateConfig(
            modality=modality, setups=("rq1",), export_masks=True, size=256, as_count=0
        )
        data = root / f"data_{modality}"
        build_dataset([case], config, data, log=lambda _: None)
        run = root / f"oracle_{modality}"
        run_eval(data, run, EvalConfig(model="agent:mask", runs=1), progress=False)
        out[modality] = (data, run)
    return out


def _bundled() -> tuple[Path, Path]:
    from radspatial.core.runtime import bundled_example

    return bundled_example()


def _results(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def test_mask_oracle_is_right_on_every_mr_question_and_prompts_say_mri(runs):
    rows = _results(runs["MR"][1])
    assert rows and all(r["correct"] for r in rows)  # the oracle: 100%
    assert {r["modality"] for r in rows} == {"MR"}
    assert all(r["prompt"].startswith(MRI_SENTENCE) for r in rows)
    ct_rows = _results(runs["CT"][1])
    assert all(r["prompt"].startswith(CT_SENTENCE) for r in ct_rows)  # MIRP's CT prompt kept
    assert {r["modality"] for r in ct_rows} == {"CT"}


def test_report_over_ct_and_mr_runs_breaks_down_by_modality(runs, tmp_path):
    from radspatial.reports.build import build_report

    build_report([runs["CT"][1], runs["MR"][1]], tmp_path)
    md = (tmp_path / "summary.md").read_text()
    section = md.split("## Modality", 1)[1].split("\n## ", 1)[0]
    assert "| Model | CT | MR |" in section and "### CT" in section and "### MR" in section
    assert "100.0 \\[" in section  # the CI's bracket, escaped for markdown
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["modalities"] == ["CT", "MR"]


def test_hf_export_carries_the_modality(runs, tmp_path):
    pytest.importorskip("pyarrow")
    from radspatial.formats.hf_export import export_hf

    exported = export_hf(runs["MR"][0], tmp_path / "hf")
    import pyarrow.parquet as pq

    table = pq.read_table(exported.shards[0])
    assert set(table.column("modality").to_pylist()) == {"MR"}
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "magnetic-resonance-imaging" in card and "| MR |" in card


def test_organ_localizer_trained_on_ct_abstains_on_mr():
    from radspatial.agent.pipeline.agent import Agent
    from radspatial.agent.pipeline.types import Context, Ref
    from radspatial.nets.unet import modality_refusal

    image = np.zeros((64, 64, 3), np.uint8)
    question = "Is the liver to the left of the spleen?"
    for spec in ("organs", "auto"):
        answer = Agent(spec).answer(image, question, context=Context(extra={"modality": "MR"}))
        assert answer.answer is None
        assert answer.trace["decision"]["reason"] == "localizer trained on CT, not MR"
    ct, mr = Context(extra={"modality": "CT"}), Context(extra={"modality": "MR"})
    assert Agent("organs").localizer.refuses([Ref(name="liver")], ct) is None
    marked = [Ref(marker="numbers", text="5"), Ref(marker="numbers", text="1")]
    assert Agent("auto").localizer.refuses(marked, mr) is None  # markers are read
    assert modality_refusal({"modalities": ["MR"]}, Context(extra={"modality": "MR"})) is None
