"""The unet localizer: a tiny training run on synthetic shapes, checkpoints, ref resolution."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
if importlib.util.find_spec("monai") is None:  # not imported here: collecting stays quick
    pytest.skip("monai is not installed", allow_module_level=True)

from radspatial.agent.pipeline.types import Context, Ref, create_localizer, list_localizers  # noqa: E402
from radspatial.core.labels import letter_code  # noqa: E402
from radspatial.imaging.slices import VARIANTS, Variant  # noqa: E402
from radspatial.nets import unet  # noqa: E402
from radspatial.training.unet_train import (  # noqa: E402
    AugParams,
    TrainConfig,
    apply_aug,
    split_items,
    train_unet,
)

SIZE = 64
# label id -> (name, intensity, half sizes (rows, cols)); TotalSegmentator ids and names
SHAPES = {1: ("spleen", 200, (7, 7)), 5: ("liver", 120, (5, 11)), 52: ("aorta", 250, (5, 5))}


def _draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Noisy background, a disc (spleen), a bar (liver), a small bright disc (aorta)."""
    img = rng.normal(40, 6, (SIZE, SIZE))
    lab = np.zeros((SIZE, SIZE), np.uint16)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    centres: list[tuple[int, int]] = []
    for label, (_, value, (hr, hc)) in SHAPES.items():
        while True:
            cy, cx = (int(v) for v in rng.integers(13, SIZE - 13, 2))
            if all(math.dist((cy, cx), c) > 22 for c in centres):
                break
        centres.append((cy, cx))
        if hr == hc:
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= hr * hr
        else:
            inside = (abs(yy - cy) <= hr) & (abs(xx - cx) <= hc)
        img[inside] = value + rng.normal(0, 6, int(inside.sum()))
        lab[inside] = label
    return np.clip(img, 0, 255).astype(np.uint8), lab


def _centre(lab: np.ndarray, label: int) -> tuple[float, float]:
    ys, xs = np.nonzero(lab == label)
    return float(xs.mean()), float(ys.mean())


def make_dataset(root: Path, n_cases: int = 4, per_case: int = 6, seed: int = 0) -> Path:
    """The dataset layout train_unet reads: manifest rows (rq1), RQ1 PNGs and masks/."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_cases):
        for z in range(per_case):
            gray, lab = _draw(rng)
            variant = Variant(VARIANTS[int(rng.integers(len(VARIANTS)))])
            rgb = variant.apply_image(np.repeat(gray[:, :, None], 3, axis=2))
            lab = variant.apply_image(lab)
            base = f"case{c}_slice{z:03d}"
            for rel, arr in ((f"RQ1/images/{base}.png", rgb), (f"masks/{base}.png", lab)):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(arr).save(root / rel)
            (x1, _), (x2, _) = _centre(lab, 1), _centre(lab, 5)
            rows.append(
                {
                    "id": f"rq1/none/{base}/q0",
                    "setup": "rq1",
                    "image": f"RQ1/images/{base}.png",
                    "mask": f"masks/{base}.png",
                    "transform": variant.code,
                    "relation": "left_of",
                    "answer": int(x1 < x2),
                    "object1": {"name": "spleen", "label_id": 1},
                    "object2": {"name": "liver", "label_id": 5},
                    "source": {"case_id": f"case{c}", "slice_index": z},
                }
            )
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two torch threads on two busy shared cores run ~8x slower than one (oversubscription)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    data = make_dataset(tmp_path_factory.mktemp("data"))
    out = tmp_path_factory.mktemp("model")
    config = TrainConfig(
        epochs=30, size=SIZE, batch_size=4, lr=1e-2, channels=(8, 16, 32), val_fraction=0.25
    )
    metrics = train_unet(data, out, config, progress=False)
    return data, out, metrics


def _val_pairs(data: Path, out: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    val = json.loads((out / "config.json").read_text())["split"]["val"]
    return [unet.load_pair(data, it) for it in unet.read_slices(data) if it.base_name in set(val)]


def test_training_learns_shapes_and_localizes_held_out_centres(trained):
    data, out, metrics = trained
    assert metrics["split"] == "val" and metrics["n_slices"] == 6
    assert set(metrics["dice"]) == {"spleen", "liver", "aorta"}
    assert min(metrics["dice"].values()) > 0.8, metrics["dice"]
    config = json.loads((out / "config.json").read_text())
    assert config["split"]["by"] == "case" and len(config["split"]["val_cases"]) == 1
    assert not set(config["split"]["val"]) & set(config["split"]["train"])
    assert [(c["label_id"], c["name"]) for c in config["classes"]] == [
        (0, "background"),
        (1, "spleen"),
        (5, "liver"),
        (52, "aorta"),
    ]
    loc = create_localizer("unet", model_dir=out)
    refs = [Ref(name=SHAPES[i][0]) for i in SHAPES]
    for image, lab in _val_pairs(data, out):
        found = loc.locate(image, refs, Context())
        for label, f in zip(SHAPES, found, strict=True):
            assert f is not None and f.method == "unet" and 0 < f.score <= 1
            assert math.dist(f.xy, _centre(lab, label)) < 2.0, (label, f)
    assert metrics["questions"]["n"] == 6
    assert metrics["questions"]["unet"]["accuracy"] >= 0.8


def test_checkpoint_round_trip_weights_only(trained, tmp_path):
    from safetensors.torch import load_file

    data, out, _ = trained
    image, _ = _val_pairs(data, out)[0]
    before = unet.load_model(out).predict(image).probs
    state = load_file(str(out / unet.WEIGHTS))
    torch.save(state, tmp_path / "state.pt")  # the same weights as a plain state dict
    net = unet.build_model(json.loads((out / "config.json").read_text())["architecture"])
    net.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True), strict=True)
    for key, value in net.state_dict().items():
        assert torch.equal(value, state[key])
    unet.clear_cache()
    after = unet.load_model(out).predict(image).probs
    np.testing.assert_array_equal(before, after)
    saved = json.loads((out / "config.json").read_text())
    assert saved["weights"]["file"] == "model.safetensors" and saved["seed"] == 0
    assert json.loads((out / "metrics.json").read_text())["dice"].keys() == {
        "spleen",
        "liver",
        "aorta",
    }


def test_refs_by_name_number_letters_dots_and_absent(trained):
    data, out, _ = trained
    image, lab = _val_pairs(data, out)[0]
    loc = create_localizer("unet", model_dir=out)
    refs = [
        Ref(name="liver"),
        Ref(marker="numbers", text="5"),
        Ref(marker="letters", text=letter_code(52)),
        Ref(name="aorta", marker="letters", text="BZ"),
        Ref(marker="dots", text="red"),
        Ref(name="kidney_left"),  # not a class of this model
        Ref(marker="numbers", text="3"),
    ]
    by_name, by_number, by_letters, both, dot, unknown, absent_id = loc.locate(
        image, refs, Context()
    )
    assert by_name is not None and by_number is not None and by_name.xy == by_number.xy
    assert by_name.details["via"] == "name" and by_number.details["via"] == "marker-number"
    assert by_letters is not None and by_letters.details["label_id"] == 52
    assert math.dist(by_letters.xy, _centre(lab, 52)) < 2.0
    assert both is not None and both.xy == by_letters.xy
    assert dot is None and unknown is None and absent_id is None
    only_spleen = image.copy()
    gone = (lab == 5) | (lab == 52)  # paint liver and aorta over with background noise
    noise = np.random.default_rng(1).normal(40, 6, (int(gone.sum()), 1))
    only_spleen[gone] = np.clip(noise, 0, 255).astype(np.uint8)
    spleen, liver, aorta = loc.locate(
        only_spleen, [Ref(name="spleen"), Ref(name="liver"), Ref(name="aorta")], Context()
    )
    assert spleen is not None and liver is None and aorta is None


def test_registry_and_cheap_import():
    assert "unet" in list_localizers()
    code = (
        "import sys; from radspatial.agent.pipeline.types import list_localizers; "
        "list_localizers(); "
        "print('torch' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"
    with pytest.raises(FileNotFoundError, match="config.json"):
        create_localizer("unet", model_dir="/nonexistent/model")


def test_single_case_split_is_a_disjoint_slice_block():
    items = [
        unet.SliceItem("only", z, f"only_slice{z:03d}", Path("i"), Path("m")) for z in range(30)
    ]
    train, val, info = split_items(items, 0.2, seed=0)
    assert info["by"] == "slice-block" and len(val) == 6 and len(train) == 24
    zs = sorted(it.slice_index for it in val)
    assert zs == list(range(zs[0], zs[0] + 6))
    assert not {it.base_name for it in train} & {it.base_name for it in val}


def test_augmentation_moves_image_and_mask_together():
    x = torch.zeros(1, 8, 8)
    x[0, 1, 2:6] = 1.0
    x[0, 2:5, 2] = 1.0  # an asymmetric "F"-like shape
    y = (x > 0).long()
    outs = set()
    for k in range(4):
        for flip in (False, True):
            xa, ya = apply_aug(x, y, AugParams(k, flip, 1.0, 0.0))
            assert torch.equal((xa > 0).long(), ya)
            outs.add(tuple(xa.flatten().tolist()))
    assert len(outs) == 8  # all eight rotation/flip variants are distinct


def test_manifest_without_masks_is_refused(tmp_path):
    row = {"id": "rq1/none/a/q0", "setup": "rq1", "image": "RQ1/images/a.png"}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="export-masks"):
        unet.read_slices(tmp_path)
