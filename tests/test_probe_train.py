"""Probe training, transfer evaluation and the table, on tiny fake probe datasets.

The fixture writes the docs/probes.md format itself (probes.json + tasks/*.jsonl + PNGs):
orient = the 8 rotation/flip variants of an asymmetric glyph, so a small CNN learns it in
seconds; permutation, localize and relpos are there to exercise their code paths.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from radspatial.imaging.slices import VARIANTS, Variant
from radspatial.probes import train as train_mod
from radspatial.probes.encoders import create_encoder, load_encoder, save_encoder
from radspatial.probes.evaluate import evaluate_probe, hungarian, task_metrics
from radspatial.probes.table import write_table
from radspatial.probes.train import train_probe

SIZE = 32
SPLIT_BASES = {"train": 8, "val": 2, "test": 3}
SMALL = {"encoder_kwargs": {"width": 8}, "image_size": SIZE}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # on a shared, loaded CPU two OpenMP threads can be 30x slower than one
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _glyph(rng: np.random.Generator) -> np.ndarray:
    """An 'F': asymmetric under every rotation/flip, jittered a little."""
    img = rng.normal(40, 10, (SIZE, SIZE)).clip(0, 255)
    y0, x0 = rng.integers(5, 9, 2)
    img[y0 : y0 + 20, x0 : x0 + 4] = 220  # stem
    img[y0 : y0 + 4, x0 : x0 + 16] = 220  # top bar
    img[y0 + 9 : y0 + 12, x0 : x0 + 10] = 220  # middle bar
    return img.astype(np.uint8)


def _rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[..., None], 3, axis=2)


def write_fake_probes(
    root: Path, *, orient_classes: tuple[str, ...] = VARIANTS, extra_test_class: str | None = None
) -> Path:
    """A probe dataset in the docs/probes.md format; the same images for any class order."""
    rng = np.random.default_rng(0)
    rows: dict[str, list[dict]] = {t: [] for t in ("orient", "permutation", "localize", "relpos")}
    cases = []
    (root / "images").mkdir(parents=True, exist_ok=True)

    def save(name: str, arr: np.ndarray) -> str:
        Image.fromarray(arr).save(root / "images" / name)
        return f"images/{name}"

    for split, n_bases in SPLIT_BASES.items():
        for b in range(n_bases):
            case = f"{split}{b}"
            cases.append({"case_id": case, "split": split, "variant": "B1", "source": "fake"})
            base = _glyph(rng)
            for code in VARIANTS:
                img = save(f"{case}_{code}.png", _rgb(Variant(code).apply_image(base)))
                target = orient_classes.index(code)
                rows["orient"].append(
                    {
                        "id": f"{case}_{code}",
                        "case_id": case,
                        "split": split,
                        "image": img,
                        "target": target,
                        "meta": {},
                    }
                )
            # permutation: shuffled 4 x 4 tiles of the glyph
            perm = rng.permutation(16)
            tiles = [base[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8] for r in range(4) for c in range(4)]
            shown = np.block([[tiles[perm[r * 4 + c]] for c in range(4)] for r in range(4)])
            img = save(f"{case}_perm.png", _rgb(shown))
            rows["permutation"].append(
                {
                    "id": f"{case}_perm",
                    "case_id": case,
                    "split": split,
                    "image": img,
                    "target": perm.tolist(),
                    "meta": {},
                }
            )
            # localize: a bright square whose centre is the target
            x, y = rng.integers(4, SIZE - 4, 2)
            sq = np.full((SIZE, SIZE), 30, np.uint8)
            sq[y - 3 : y + 4, x - 3 : x + 4] = 230
            img = save(f"{case}_loc.png", _rgb(sq))
            xy = [(x + 0.5) / SIZE, (y + 0.5) / SIZE]
            rows["localize"].append(
                {
                    "id": f"{case}_loc",
                    "case_id": case,
                    "split": split,
                    "image": img,
                    "target": xy,
                    "meta": {},
                }
            )
            # relpos: a red and a blue dot
            dots = np.full((SIZE, SIZE, 3), 20, np.uint8)
            (rx, ry), (bx, by) = rng.integers(3, SIZE - 3, (2, 2))
            dots[ry - 2 : ry + 3, rx - 2 : rx + 3] = (255, 0, 0)
            dots[by - 2 : by + 3, bx - 2 : bx + 3] = (0, 0, 255)
            dx, dy = bx - rx, by - ry
            cls = (1 if dx > 0 else 0) if abs(dx) >= abs(dy) else (3 if dy > 0 else 2)
            img = save(f"{case}_rel.png", dots)
            rows["relpos"].append(
                {
                    "id": f"{case}_rel",
                    "case_id": case,
                    "split": split,
                    "image": img,
                    "target": cls,
                    "meta": {},
                }
            )
    classes = list(orient_classes)
    if extra_test_class:  # a class the model never saw: counted as unmapped
        classes.append(extra_test_class)
        for i in range(2):
            img = save(f"extra{i}.png", _rgb(_glyph(rng)))
            rows["orient"].append(
                {
                    "id": f"extra{i}",
                    "case_id": "test0",
                    "split": "test",
                    "image": img,
                    "target": len(classes) - 1,
                    "meta": {},
                }
            )

    def info(task, level, kind, cls, chance, metric, by_metric, ref=None):
        counts = {s: sum(r["split"] == s for r in rows[task]) for s in SPLIT_BASES}
        return {
            "level": level,
            "kind": kind,
            "n_classes": len(cls) if cls else None,
            "classes": cls,
            "chance": chance,
            "metric": metric,
            "reference_size_px": ref,
            "counts": counts,
            "description": task,
            "chance_by_metric": by_metric,
        }

    tasks = {
        "orient": info(
            "orient",
            3,
            "classification",
            classes,
            1 / 8,
            "accuracy",
            {"accuracy": 1 / 8, "flip_accuracy": 0.5},
        ),
        "permutation": info(
            "permutation",
            2,
            "permutation",
            None,
            1 / math.factorial(16),
            "permutation_accuracy",
            {"permutation_accuracy": 1 / math.factorial(16), "tile_accuracy": 1 / 16},
        ),  # fmt: skip
        "localize": info(
            "localize",
            1,
            "regression",
            None,
            150.0,
            "mean_euclidean_distance_px",
            {"mean_euclidean_distance_px": 150.0},
            512,
        ),
        "relpos": info(
            "relpos",
            3,
            "classification",
            ["left", "right", "above", "below"],
            0.25,
            "accuracy",
            {"accuracy": 0.25},
        ),
    }
    (root / "tasks").mkdir(exist_ok=True)
    for task, rs in rows.items():
        (root / "tasks" / f"{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    meta = {
        "format": "radspatial-probes",
        "format_version": 1,
        "config": {"size": SIZE},
        "seed": 0,
        "cases": cases,
        "tasks": tasks,
        "versions": {},
    }
    (root / "probes.json").write_text(json.dumps(meta))
    return root


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> Path:
    return write_fake_probes(tmp_path_factory.mktemp("probes") / "phantom")


@pytest.fixture(scope="module")
def run(fake, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("runs") / "rs-mlp"
    tasks = ["orient", "permutation", "localize"]
    kw = dict(epochs=12, batch_size=16, lr=3e-3, progress=False, **SMALL)
    res = train_probe(fake, out, encoder="resnet-small", head="mlp", tasks=tasks, **kw)
    return out, res


def test_training_learns_orient_and_writes_results(run):
    out, res = run
    orient = res["tasks"]["orient"]
    assert orient["test"]["n"] == 24 and orient["chance"]["accuracy"] == 1 / 8
    assert orient["test"]["accuracy"] >= 0.5, orient  # chance 12.5%
    assert orient["test"]["flip_accuracy"] >= orient["test"]["accuracy"]
    assert orient["training"]["images_per_s"] > 0 and orient["training"]["epochs"] == 12
    assert orient["training"]["final_loss"] < orient["training"]["first_loss"]
    perm = res["tasks"]["permutation"]["test"]
    assert set(perm) >= {"permutation_accuracy", "tile_accuracy", "n"}
    assert res["tasks"]["localize"]["test"]["mean_euclidean_distance_px"] > 0
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["tasks"].keys() == res["tasks"].keys() and on_disk["mode"] == "finetuned"
    for task in res["tasks"]:
        assert {"model.json", "head.safetensors", "encoder.safetensors"} <= {
            p.name for p in (out / "models" / task).iterdir()
        }


def test_training_is_seeded(fake, tmp_path):
    kw = dict(
        encoder="resnet-small",
        head="mlp",
        tasks=["relpos"],
        epochs=1,
        batch_size=16,
        progress=False,
        **SMALL,
    )
    a = train_probe(fake, tmp_path / "a", **kw)["tasks"]["relpos"]
    b = train_probe(fake, tmp_path / "b", **kw)["tasks"]["relpos"]
    assert a["test"] == b["test"] and a["training"]["final_loss"] == b["training"]["final_loss"]


def test_frozen_encoder_stays_frozen(fake, tmp_path, monkeypatch):
    torch.manual_seed(3)
    enc = create_encoder("resnet-small", width=8, image_size=SIZE)
    save_encoder(enc, tmp_path / "ck")
    used = []
    real_freeze = train_mod.freeze
    monkeypatch.setattr(train_mod, "freeze", lambda e: used.append(real_freeze(e)) or used[-1])
    kw = dict(frozen=tmp_path / "ck", tasks=["orient"], epochs=3, batch_size=16, progress=False)
    res = train_probe(
        fake, tmp_path / "run", encoder="resnet-small", head="transformer",
        task_epochs={"orient": 1}, **kw,
    )  # fmt: skip
    assert res["tasks"]["orient"]["training"]["epochs"] == 1  # task_epochs overrides epochs
    t = res["tasks"]["orient"]["training"]["params"]
    assert res["mode"] == "frozen" and t["trainable"] == t["head"]
    before = load_encoder(tmp_path / "ck").state_dict()
    after = used[0].state_dict()  # includes batch-norm running statistics
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    # the run folder is self-contained: the task model points at the stored frozen encoder
    meta = json.loads((tmp_path / "run" / "models" / "orient" / "model.json").read_text())
    assert meta["encoder"] == "../../encoder"
    with pytest.raises(ValueError, match="not 'vit-tiny'"):
        train_probe(
            fake,
            tmp_path / "x",
            encoder="vit-tiny",
            head="mlp",
            frozen=tmp_path / "ck",
            progress=False,
        )


def test_task_epochs_override():
    cfg = train_mod.TrainConfig("resnet-small", "mlp", epochs=25, task_epochs={"relpos": 8})
    assert (cfg.epochs_for("relpos"), cfg.epochs_for("orient")) == (8, 25)
    with pytest.raises(ValueError, match="task_epochs"):
        train_mod.TrainConfig("resnet-small", "mlp", task_epochs={"relpos": 0})


def test_hungarian_assignment_by_hand():
    truth = np.arange(16)[::-1].copy()
    logits = np.full((2, 16, 16), -5.0)
    logits[0, np.arange(16), truth] = 5.0
    logits[0, 1, truth[0]] = 6.0  # tile 1 prefers tile 0's place, but 0 wants it more in total
    logits[1, np.arange(16), truth] = 5.0
    logits[1, 2, truth[2]], logits[1, 2, truth[3]] = 0.0, 8.0  # tiles 2 and 3 swapped
    logits[1, 3, truth[3]], logits[1, 3, truth[2]] = 0.0, 8.0
    assign = hungarian(logits)
    assert assign[0].tolist() == truth.tolist()
    assert sorted(assign[1].tolist()) == list(range(16))  # a permutation
    m = task_metrics("permutation", {"kind": "permutation"}, logits, np.stack([truth, truth]))
    assert m["permutation_accuracy"] == 0.5
    assert m["tile_accuracy"] == pytest.approx(30 / 32)
    assert m["tile_accuracy_argmax"] == pytest.approx(29 / 32)  # argmax puts tile 1 wrong


def test_transfer_maps_classes_by_name(run, tmp_path):
    out, res = run
    # the same images, classes in reverse order plus a class the model never saw
    other = write_fake_probes(tmp_path / "ct", orient_classes=VARIANTS[::-1], extra_test_class="C1")
    ev = evaluate_probe(out, other, tmp_path / "ev")
    orient = ev["tasks"]["orient"]["test"]
    assert orient["n_unmapped"] == 2 and orient["n"] == res["tasks"]["orient"]["test"]["n"]
    assert orient["accuracy"] == res["tasks"]["orient"]["test"]["accuracy"]
    assert ev["tasks"]["permutation"]["test"] == {
        **res["tasks"]["permutation"]["test"],
        "n_unmapped": 0,
    }
    assert (tmp_path / "ev" / "results.json").is_file() and (
        tmp_path / "ev" / "predictions" / "orient.jsonl"
    ).is_file()
    everything = evaluate_probe(out, other, None, split="all")
    assert everything["tasks"]["orient"]["train"]["n"] == 64


def test_write_table_has_chance_and_numbers(tmp_path):
    def results(kind, head, mode, orient, perm, med, **extra):
        tasks = {
            "orient": {"chance": {"accuracy": 0.125}, "test": {"accuracy": orient, "n": 24}},
            "permutation": {
                "chance": {"permutation_accuracy": 1 / math.factorial(16), "tile_accuracy": 1 / 16},
                "test": {"permutation_accuracy": perm[0], "tile_accuracy": perm[1], "n": 13},
            },  # fmt: skip
            "localize": {
                "chance": {"mean_euclidean_distance_px": 151.25},
                "test": {"mean_euclidean_distance_px": med, "n": 13},
            },
        }
        return {
            "kind": kind,
            "encoder": "resnet-small",
            "head": head,
            "mode": mode,
            "frozen": "random" if mode == "frozen" else None,
            "data_name": "ct" if kind == "transfer" else "phantom",
            "data": str(tmp_path / ("ct" if kind == "transfer" else "phantom")),
            "source_data": str(tmp_path / "phantom"),
            "tasks": tasks,
            **extra,
        }

    # class counts for the majority-class row: B2 is the training majority (10 of 16)
    counts = {
        "phantom": (["A1", "B2"], {"train": [6, 10], "test": [3, 1]}),
        "ct": (["B2", "A1", "C1"], {"train": [0, 0, 0], "test": [2, 6, 0]}),
    }
    for name, (classes, cc) in counts.items():
        (tmp_path / name).mkdir()
        info = {"tasks": {"orient": {"classes": classes, "class_counts": cc}}}
        (tmp_path / name / "probes.json").write_text(json.dumps(info))
    dirs = []
    for i, r in enumerate([
        results("train", "mlp", "finetuned", 0.8125, (0.25, 0.5), 23.456),
        results("train", "transformer", "frozen", 0.5, (0.0, 0.0625), 40.0),
        results("transfer", "mlp", "finetuned", 0.375, (0.0, 0.125), 80.04),
    ]):  # fmt: skip
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "results.json").write_text(json.dumps(r))
        dirs.append(tmp_path / f"r{i}")
    md = write_table(dirs, tmp_path / "table").read_text()
    assert (tmp_path / "table" / "table1.png").stat().st_size > 1000
    lines = md.splitlines()
    assert "| Chance |  |  | 151.2 | 0.0 (6.2) | – | 12.5 | – | – | – | – |" in lines
    assert (
        "| resnet-small | mlp | finetuned | 23.5 | 25.0 (50.0) | – | 81.2 | – | – | – | – |"
        in lines
    )
    frozen_row = "| resnet-small | transformer | frozen (random) | 40.0 | 0.0 (6.2) | – | 50.0 |"
    assert frozen_row + " – | – | – | – |" in lines
    assert (
        "| resnet-small | mlp | finetuned | 80.0 | 0.0 (12.5) | – | 37.5 | – | – | – | – |" in lines
    )
    majority = [ln for ln in lines if ln.startswith("| Majority class (train) |")]
    assert [m.split(" | ")[6] for m in majority] == ["25.0", "25.0"]  # 1 of 4, 2 of 8
    blocks = [ln for ln in lines if ln.startswith("| **")]
    assert blocks == [
        "| **In domain: phantom** |  |  |  |  |  |  |  |  |  |  |",
        "| **Transfer: phantom → ct** |  |  |  |  |  |  |  |  |  |  |",
    ]
    assert md.count("| Chance |") == 2 and "| n (test) |  |  | 13 | 13 | – | 24 |" in md
    assert "RelOrg" not in md  # the optional relpos_organ column: only when a run has it
    r = results("train", "mlp", "finetuned", 0.8125, (0.25, 0.5), 23.456)
    r["tasks"]["relpos_organ"] = {"chance": {"accuracy": 0.25}, "test": {"accuracy": 0.75, "n": 8}}
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "results.json").write_text(json.dumps(r))
    lines = write_table([tmp_path / "r3"], tmp_path / "table2").read_text().splitlines()
    assert lines[4].endswith("| Count ↑ | RelOrg ↑ |")
    assert "| Chance |  |  | 151.2 | 0.0 (6.2) | – | 12.5 | – | – | – | – | 25.0 |" in lines
    assert lines[-1].endswith("| 81.2 | – | – | – | – | 75.0 |")


def test_frozen_hf_encoder_trains_and_transfers(fake, tmp_path):
    from test_probe_models import _tiny_dinov2

    src = _tiny_dinov2(tmp_path / "dino")
    kw = dict(frozen="pretrained", tasks=["relpos"], epochs=1, batch_size=16, progress=False)
    res = train_probe(fake, tmp_path / "run", encoder=f"hf:{src}", head="both", **kw)
    assert res["mode"] == "frozen" and res["tasks"]["relpos"]["test"]["n"] == 3
    ev = evaluate_probe(tmp_path / "run", fake, None)
    assert ev["tasks"]["relpos"]["test"] == {**res["tasks"]["relpos"]["test"], "n_unmapped": 0}
    with pytest.raises(ValueError, match="needs encoder"):
        train_probe(fake, tmp_path / "x", encoder="resnet-small", head="mlp", **kw)
