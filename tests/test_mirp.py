"""MIRP fidelity: our ``mirp`` block against MIRP's own, unmodified evaluation scripts.

The scripts (MIT, in ../shared/data/mirp_eval) are the judge: they run in a subprocess on
``radspatial export mirp`` of real eval runs (a real OpenAI-compatible server on localhost that
answers in many styles, and the anatomy-prior baseline) and their Excel numbers must equal the
``mirp`` block of ``metrics.json`` exactly, for every setup/marker group.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_server import FakeChatServer, prompt_text

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.bench.mirp import MIRP_CENTRES, class_name
from radspatial.cli import main
from radspatial.eval.items import load_items
from radspatial.eval.mirp import draw_examples, parse_mirp
from radspatial.eval.runner import EvalConfig, mirp_examples, run_eval
from radspatial.imaging.volumes import Case

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
MIRP_EVAL = SHARED / "mirp_eval"
IMAGE_SCRIPT = MIRP_EVAL / "RQ1_RQ2_RQ3-2_calculate_results_image.py"
ANATOMY_SCRIPT = MIRP_EVAL / "RQ3-1_calculate_results_anatomy.py"
BUNDLED = Path(__file__).resolve().parents[1] / "src" / "radspatial" / "data"

needs_scripts = pytest.mark.skipif(
    not IMAGE_SCRIPT.is_file()
    or importlib.util.find_spec("openpyxl") is None
    or importlib.util.find_spec("sklearn") is None,
    reason="MIRP's scripts need ../shared/data/mirp_eval, openpyxl and scikit-learn",
)

# Replies in the styles real models give, so every step of MIRP's cascade is exercised.
STYLES = (
    "1",
    "0",
    " (1). ",
    "Yes",
    "no.",
    "Yes, it is.",
    "1 - the first structure is higher",
    "The answer is clearly no",
    "It is to the left.",
    "It lies below it.",
    "Looking at the image carefully.\nThe first one is to the right of the second.",
    "I cannot determine this from the image.",
    "Final answer: 0",
    "Considering the anatomy, the answer is 1",
    "",
)


def _styled_reply(body: dict) -> str:
    text = prompt_text(body)
    h = hashlib.sha256(text.encode()).digest()
    return STYLES[h[0] % len(STYLES)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mirp") / "ds"
    case = Case("example", BUNDLED / "example_ct_sm.nii.gz", BUNDLED / "example_seg.nii.gz")
    build_dataset([case], GenerateConfig(seed=3, size=384, as_count=8), out)
    return out


@pytest.fixture(scope="module")
def runs(dataset, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    with FakeChatServer(answer=_styled_reply) as server:
        spec = f"openai-compat:styled@{server.base_url}"
        out["styled"] = root / "styled"
        run_eval(dataset, out["styled"], EvalConfig(model=spec, runs=3), progress=False)
        out["styled-mirp"] = root / "styled-mirp"
        config = EvalConfig(model=spec, runs=3, protocol="mirp")
        run_eval(dataset, out["styled-mirp"], config, progress=False)
    out["prior"] = root / "prior"
    run_eval(
        dataset, out["prior"], EvalConfig(model="baseline:anatomy-prior", runs=3), progress=False
    )
    return out


# the folders the image script is also run on as a subprocess: no markers, and dots on blanks
SCRIPT_KEYS = ("RQ1/none", "AS/dots")


def _xlsx(x: float) -> float:
    """A float as openpyxl stores it in the xlsx (16 significant digits)."""
    return float(f"{x:.16g}")


def _load(script: Path):
    spec = importlib.util.spec_from_file_location(script.stem.replace("-", "_"), script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _script_numbers(script: Path, folder: Path) -> list:
    from openpyxl import load_workbook

    done = subprocess.run(
        [sys.executable, str(script)], cwd=folder, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    (xlsx,) = [p for p in folder.glob("Results*.xlsx")]
    row = [c.value for c in next(load_workbook(xlsx).active.iter_rows(min_row=2, max_row=2))]
    xlsx.unlink()
    return row


@needs_scripts
@pytest.mark.parametrize("model", ["styled", "styled-mirp", "prior"])
def test_mirp_scripts_agree_with_our_mirp_block(runs, tmp_path, model):
    image_ref, anatomy_ref = _load(IMAGE_SCRIPT), _load(ANATOMY_SCRIPT)
    metrics = json.loads((runs[model] / "metrics.json").read_text())
    block = metrics["mirp"]
    assert set(block) == {
        "RQ1/none",
        *(f"{s}/{m}" for s in ("RQ2", "RQ3", "AS") for m in ("dots", "letters", "numbers")),
    }
    out = tmp_path / "export"
    assert main(["export", "mirp", "--run", str(runs[model]), "--out", str(out)]) == 0
    for key, ours in block.items():
        setup, marker = key.split("/")
        folder = out / (f"{setup}_qa" if marker == "none" else f"{setup}_qa_{marker}")
        stats = [ours["image"][k] for k in ("accuracy_mean", "accuracy_std", "f1_mean", "f1_std")]
        if key in SCRIPT_KEYS:
            # the unmodified script, end to end (a subprocess each: two keys per model suffice
            # for its xlsx path; the functions below check every key): its xlsx row is
            # [acc mean, acc std, f1 mean, f1 std, "", correct x3, incorrect x3, unsure x3]
            img = _script_numbers(IMAGE_SCRIPT, folder)
            assert img[:4] == [_xlsx(v) for v in stats], key
            assert img[5:8] == ours["image"]["correct"], key
            assert img[11:14] == ours["image"]["unsure"], key
        # the same functions in-process: equal to the last bit
        files = sorted(str(p) for p in (folder / "answers").glob("*.json"))
        agg = image_ref.process_runs(files)["aggregated"]
        assert [agg[k] for k in ("accuracy_mean", "accuracy_std", "f1_mean", "f1_std")] == stats
    anat = _script_numbers(ANATOMY_SCRIPT, out / "RQ1_qa")
    mine = block["RQ1/none"]["anatomy_left_right"]
    assert mine["n_items"] > 0
    stats = [mine[k] for k in ("accuracy_mean", "accuracy_std", "f1_mean", "f1_std")]
    assert anat[:4] == [_xlsx(v) for v in stats]
    assert anat[5:8] == mine["correct"]
    centre_map = anatomy_ref.load_centres(str(out / "RQ1_qa" / MIRP_CENTRES))
    files = sorted((out / "RQ1_qa" / "answers").glob("*.json"))
    agg = anatomy_ref.aggregate_runs([anatomy_ref.eval_run(str(p), centre_map) for p in files])
    keys = ("anat_acc_mean", "anat_acc_std", "anat_f1_mean", "anat_f1_std")
    assert [agg["agg"][k] for k in keys] == stats
    # RQ3(1)'s image frame: the script's own left/right selection, its xlsx columns 12-15
    image = block["RQ1/none"]["anatomy_image"]
    stats = [image[k] for k in ("accuracy_mean", "accuracy_std", "f1_mean", "f1_std")]
    assert anat[12:16] == [_xlsx(v) for v in stats]
    keys = ("img_acc_mean", "img_acc_std", "img_f1_mean", "img_f1_std")
    assert [agg["agg"][k] for k in keys] == stats
    assert [r["img_total"] for r in agg["runs"]] == [image["n_items"]] * len(agg["runs"])


@needs_scripts
def test_anatomy_prior_is_what_mirp_calls_reciting_anatomy(runs):
    block = json.loads((runs["prior"] / "metrics.json").read_text())["mirp"]
    # high in MIRP's anatomical left/right, near chance in the image frame. The built-in atlas
    # averages 6 anatomies (issue #34), not this volume: 15 of 17 here; the misses are the
    # colon, whose typical centre lies near the midline, against the left autochthon
    assert block["RQ1/none"]["anatomy_left_right"]["accuracy_mean"] >= 0.85
    assert block["RQ1/none"]["image"]["accuracy_mean"] <= 0.75


@needs_scripts
def test_parser_matches_mirp_on_every_reply_style_and_the_reply_corpus():
    ref = _load(IMAGE_SCRIPT)
    corpus = [json.loads(x) for x in (Path(__file__).parent / "data" / "replies.jsonl").open()]
    questions = ["Is the liver to the left of the spleen?", "Is the aorta above the spleen?"]
    prompt = "Q: Is the aorta above the spleen? A: 1\nNow answer the real question:"
    replies = [c["reply"] for c in corpus] + list(STYLES) + [prompt + "\nNo, it is below."]
    for q in questions:
        for reply in replies:
            assert parse_mirp(reply, q, prompt) == ref.parse_model_answer(reply, q, prompt)[0], (
                reply,
                q,
            )


def test_class_name_is_mirps_lookup_key():
    assert class_name("left kidney") == "kidney_left"
    assert class_name("inferior vena cava") == "inferior_vena_cava"
    assert class_name("Right Adrenal Gland") == "adrenal_gland_right"


def test_generated_dataset_has_mirps_centres_file_with_every_rq1_structure(dataset):
    centres = {e["filename"]: e for e in json.loads((dataset / MIRP_CENTRES).read_text())}
    rows = [json.loads(x) for x in (dataset / "manifest.jsonl").read_text().splitlines()]
    rq1 = [r for r in rows if r["setup"] == "rq1"]
    assert rq1
    for r in rq1:
        info = {li["class_name"]: li for li in centres[Path(r["image"]).name]["label_info"]}
        for obj in (r["object1"], r["object2"]):
            li = info[class_name(obj["display_name"])]
            assert [li["center_x"], li["center_y"]] == obj["center_xy_canonical"]


def test_as_files_follow_mirps_published_schema(dataset):
    for marker, kind in (("numbers", int), ("letters", str), ("dots", str)):
        (entry, *_) = json.loads((dataset / "AS" / f"qa_{marker}.json").read_text())
        qa = entry["question_answer"][0]
        assert set(qa) == {
            "object1_gray",
            "object2_gray",
            "question",
            "answer",
            "object1_center_x",
            "object1_center_y",
            "object2_center_x",
            "object2_center_y",
        }
        assert isinstance(qa["object1_gray"], kind)
        assert all(isinstance(qa[k], int) for k in qa if "center" in k)
    rq2 = json.loads((dataset / "RQ2" / "qa_letters.json").read_text())[0]["question_answer"][0]
    assert "object1_label" in rq2  # the RQ letter files' quirk


def test_protocol_mirp_draws_examples_like_mirps_inference_code(dataset):
    import random

    items = [i for i in load_items(dataset) if i.setup == "rq2" and i.marker == "dots"]
    examples = mirp_examples(items, runs=2)
    # MIRP: random.seed(2025) per setup/marker, then per run, per image in file order,
    # random.choice(other images)
    ordered = sorted(items, key=lambda i: i.extra["order"])
    rng = random.Random(2025)
    for run in range(2):
        for item in ordered:
            other = rng.choice([o for o in ordered if o.id != item.id])
            assert examples[(item.id, run)] == (other.question, other.expected)
    # different examples across runs for some item (drawn anew each run)
    assert any(examples[(i.id, 0)] != examples[(i.id, 1)] for i in items)
    with pytest.raises(ValueError, match="two items"):
        draw_examples({("rq1", "none", "relative_position"): [("a", "q", 1)]}, 1)


def test_protocol_mirp_sends_text_first_and_the_ct_prompt_everywhere(dataset, tmp_path):
    with FakeChatServer(answer=lambda body: "1") as server:
        spec = f"openai-compat:m@{server.base_url}"
        config = EvalConfig(model=spec, runs=1, protocol="mirp", setups=("rq1", "as"))
        rows = run_eval(dataset, tmp_path / "r", config, progress=False)
        for body in server.bodies:
            kinds = [part["type"] for part in body["messages"][0]["content"]]
            assert kinds == ["text", "image_url"]
            assert prompt_text(body).startswith("The image is a 2D axial slice")
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["protocol"] == "mirp" and info["decoding"]["max_tokens"] == 1024
    # examples are real items' questions with their true answers
    questions = {r["question"] for r in rows}
    for r in rows:
        example = r["prompt"].split("Example:\nQ: ")[1].split(" A: ")[0]
        assert example in questions  # (another image may ask the same words)


def test_vllm_puts_text_first_by_default():
    from radspatial.models.base import Request
    from radspatial.models.vllm_backend import chat_message as _message

    default = _message(Request("k", "p", b"png"))[0]["content"]
    last = _message(Request("k", "p", b"png", text_first=False))[0]["content"]
    assert [c["type"] for c in default] == ["text", "image_url"]
    assert [c["type"] for c in last] == ["image_url", "text"]


def test_export_without_results_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no results.jsonl"):
        from radspatial.formats.mirp_export import export_mirp

        export_mirp(tmp_path, tmp_path / "out")


def test_export_copies_centres_next_to_the_anatomy_script(runs, tmp_path):
    out = tmp_path / "x"
    main(["export", "mirp", "--run", str(runs["prior"]), "--out", str(out)])
    assert (out / MIRP_CENTRES).is_file() and (out / "RQ1_qa" / MIRP_CENTRES).is_file()
    (answers,) = (out / "RQ1_qa" / "answers").parent.glob("answers")
    assert sorted(p.name for p in answers.iterdir()) == [
        f"qa_all_images_run_{k}.json" for k in range(3)
    ]
    entry = json.loads((answers / "qa_all_images_run_0.json").read_text())[0]
    assert set(entry) == {"file_name", "results_call"}
    assert set(entry["results_call"][0]) == {
        "question",
        "model_answer",
        "expected_answer",
        "entire_prompt",
    }
    shutil.rmtree(out)


def _concave_slice():
    """A C-shaped structure (label 1: its centre of mass lies in the C's hole, so its marker
    goes to an interior point) and a disc (label 2) placed so that the centres say "the disc is
    above" while the drawn markers say the opposite."""
    import numpy as np

    yy, xx = np.mgrid[0:200, 0:200]
    r = np.hypot(xx - 100, yy - 100)
    lab = np.zeros((200, 200), np.int32)
    lab[(r >= 40) & (r <= 60) & (xx <= 100)] = 1  # left half ring, opening to the right
    lab[np.hypot(xx - 110, yy - 80) <= 9] = 2
    return lab


def test_markers_of_a_concave_structure_never_contradict_the_answer():
    import math

    import numpy as np

    from radspatial.bench.plans import candidate as _candidate
    from radspatial.imaging.slices import VARIANTS, Geometry, Variant, structure_stats
    from radspatial.questions import QuestionRules, SliceFacts, get_question_type

    lab = _concave_slice()
    geom = Geometry.for_slice(lab.shape, (1.0, 1.0), 200)
    stats = structure_stats(lab, geom)
    assert not stats[1].inside  # concave: the marker is not at the centre of mass
    c, m = stats, {k: s.marker_xy for k, s in stats.items()}
    # precondition: along y the centres differ by >= 10 px, but the markers order the other way
    assert abs(c[1].center_xy[1] - c[2].center_xy[1]) >= 10
    assert (c[1].center_xy[1] < c[2].center_xy[1]) != (m[1][1] < m[2][1])
    # the strict profile's rule (mirp draws markers at the centres: nothing to contradict)
    rules = QuestionRules(min_distance_px=20.0, profile="strict")
    assert math.dist(c[1].center_xy, c[2].center_xy) >= rules.min_distance_px
    qtype = get_question_type("relative_position")
    asked = 0
    for code in VARIANTS:
        variant = Variant(code)
        cands = tuple(_candidate(stats[k], f"s{k}", variant, 200) for k in (1, 2))
        facts = SliceFacts(variant=code, size=200, candidates=cands)
        for seed in range(20):
            spec = qtype.propose(facts, seed % 2, np.random.default_rng(seed), rules)
            if spec is None:
                continue
            asked += 1
            a, b = spec.objects
            axis = 0 if spec.relation in ("left_of", "right_of") else 1
            for p, q, answer in (
                (a.marker_xy, b.marker_xy, spec.answer),
                (a.marker_xy_canonical, b.marker_xy_canonical, spec.answer_standard),
            ):
                assert abs(p[axis] - q[axis]) >= rules.margin_px
                first_smaller = p[axis] < q[axis]
                says = first_smaller if spec.relation in ("left_of", "above") else not first_smaller
                assert int(says) == answer, (code, spec.relation)
    assert asked  # the other axis (left/right) still gives questions
