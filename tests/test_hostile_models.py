"""Hostile model folders and training inputs for ``agent`` / ``agent train`` (issue 36, classes
4 and 7, and round 3's leftovers): one row per case, exit 2 and the words of the one-line
message (tests/hostile.py). A model folder is the shipped organs ``config.json`` with one field
changed, so every other field is a real one; the checks run before torch builds anything."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest
from hostile import Base, Case, run_case

from radspatial.nets.unet_config import read_pixels

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "radspatial" / "data" / "organs"


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` px and holds no pixels (decoding it would
    need width x height bytes)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    tmp = tmp_path_factory.mktemp("hostile_models")
    return Base(tmp, tmp)


def _png(path: Path, size: tuple[int, int] = (64, 64), mode: str = "RGB") -> Path:
    from PIL import Image

    Image.new(mode, size).save(path)
    return path


def model(change, weights: bytes = b"x") -> Case:
    """``agent --localizer unet --model M`` where M's config.json is the shipped one changed."""

    def setup(tmp: Path, base: Base) -> list[str]:
        config = json.loads((SHIPPED / "config.json").read_text())
        change(config)
        (tmp / "m").mkdir()
        (tmp / "m" / "config.json").write_text(json.dumps(config))
        (tmp / "m" / "model.safetensors").write_bytes(weights)
        return ["agent", "--image", str(_png(tmp / "a.png")), "--question", "Is 1 left of 2?",
                "--localizer", "unet", "--model", str(tmp / "m")]  # fmt: skip

    return setup


def _set(path: str, value) -> object:
    def change(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return change


def _train(*more: str, inside: bool = False) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "ds").mkdir()
        (tmp / "ds" / "manifest.jsonl").write_text("")
        out = tmp / "ds" / "model" if inside else tmp / "model"
        return ["train", "unet", "--data", str(tmp / "ds"), "--out", str(out), *more]

    return setup


def _wrong_mask(tmp: Path, base: Base) -> list[str]:
    return ["agent", "--image", str(_png(tmp / "a.png")), "--question", "Is 1 left of 2?",
            "--localizer", "mask", "--mask", str(_png(tmp / "m.png", (32, 48)))]  # fmt: skip


def _dataset_untouched(tmp: Path) -> None:
    assert [p.name for p in (tmp / "ds").iterdir()] == ["manifest.jsonl"]


CASES = [
    Case("config size 1e6", model(_set("size", 1_000_000)), 2, ("config.json", "size")),
    Case("config size a float", model(_set("size", 1e6)), 2, ("config.json", "size")),
    Case("config 65536 channels", model(_set("architecture.channels", [65536, 2])), 2,
         ("config.json", "architecture.channels[0]")),
    Case("config classes an int", model(_set("classes", 5)), 2,
         ("config.json", "classes must be a list")),
    Case("config out_channels mismatch", model(_set("architecture.out_channels", 3)), 2,
         ("config.json", "out_channels 3 != 45")),
    Case("config label id a string", model(_set("classes.1.label_id", "1")), 2,
         ("config.json", "classes[1].label_id")),
    Case("config label id twice", model(_set("classes.2.label_id", 1)), 2,
         ("config.json", "given twice")),
    Case("config unknown architecture", model(_set("architecture.name", "os.system")), 2,
         ("config.json", "architecture")),
    Case("config strides 1000", model(_set("architecture.strides", [1000, 2, 2, 2])), 2,
         ("config.json", "strides[0]")),
    Case("config modalities a string", model(_set("modalities", "CT")), 2,
         ("config.json", "modalities")),
    Case("train --size 100000", _train("--size", "100000"), 2, ("--size 100000", "16..1024")),
    Case("train --out inside --data", _train(inside=True), 2, ("--out", "lies inside"),
         _dataset_untouched),
    Case("agent --mask of another size", _wrong_mask, 2, ("m.png", "--mask", "--image")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_models(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_case(case, tmp_path, base, capsys, monkeypatch)


def test_phantom_nan_spacing_names_the_option(tmp_path, capsys):
    from radspatial.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["phantom", "--out", str(tmp_path / "p"), "--spacing", "nan,1,1"])
    assert exc.value.code == 2 and "--spacing" in capsys.readouterr().err


def test_a_30000_px_mask_is_refused_before_decoding(tmp_path):
    (tmp_path / "m.png").write_bytes(_png_header(30000, 30000))
    with pytest.raises(ValueError, match=r"m\.png: mask .*over the (pixel )?limit"):
        read_pixels(tmp_path / "m.png", "mask")


def test_a_damaged_atlas_names_its_file(tmp_path):
    from radspatial.agent.localizers.organs.organs_atlas import load_atlas

    np.savez(tmp_path / "atlas.npz", grey=np.zeros((2, 4, 4)), labels=np.zeros((3, 4, 4)))
    (tmp_path / "atlas.json").write_text("{}")
    with pytest.raises(ValueError, match=r"atlas\.npz: not an atlas archive"):
        load_atlas(str(tmp_path))
    np.savez(tmp_path / "atlas.npz", grey=np.zeros((2, 4, 4)), labels=np.zeros((3, 4, 4)),
             known=np.zeros((2, 5)))  # fmt: skip
    with pytest.raises(ValueError, match=r"atlas\.npz: grey, labels and known"):
        load_atlas.__wrapped__(str(tmp_path))


def test_a_dataset_label_table_is_read_from_the_dataset_not_the_cwd(tmp_path, monkeypatch):
    from radspatial.nets.unet import label_names

    ds = tmp_path / "ds"
    (ds / "labels").mkdir(parents=True)
    (ds / "labels" / "L.json").write_text(json.dumps({"1": "liver", "2": "spleen"}))
    (ds / "dataset.json").write_text(json.dumps({"cases": [{"labels": "labels/L.json"}]}))
    monkeypatch.chdir(tmp_path)  # not the dataset: the table is still found inside it
    assert label_names(ds, [])[1] == "liver"
    (ds / "dataset.json").write_text(json.dumps({"cases": [{"labels": "../L.json"}]}))
    (tmp_path / "L.json").write_text(json.dumps({"1": "x"}))
    with pytest.raises(ValueError, match="outside the dataset"):
        label_names(ds, [])


def test_a_full_disk_names_the_output_path(tmp_path, monkeypatch):
    import os

    from radspatial.core import io
    from radspatial.core.errors import os_error_line

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as exc:
        io.atomic_write_bytes(tmp_path / "out" / "x.json", b"{}")
    line = os_error_line(exc.value)
    assert str(tmp_path / "out" / "x.json") in line and "no space left" in line
    bare = OSError(errno.ENOSPC, "No space left on device")
    assert str((tmp_path / "o").resolve()) in os_error_line(bare, tmp_path / "o")


def test_weights_that_do_not_fit_the_config_name_the_file(tmp_path):
    from radspatial.nets.unet import UNetModel

    model(lambda c: None)(tmp_path, Base(tmp_path, tmp_path))
    with pytest.raises(ValueError, match=r"model\.safetensors: does not fit config\.json"):
        UNetModel(tmp_path / "m")


PROBE_META = {
    "format": "radspatial-probe-model",
    "version": 1,
    "task": "orient",
    "task_info": {"kind": "classify"},
    "head": {"name": "linear", "kwargs": {"dim": 8, "grid": [2, 2], "out_shape": [4]}},
    "encoder": ".",
    "image_size": 32,
}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: [m], "expected an object"),
        (lambda m: {**m, "encoder": "/etc"}, "absolute path"),
        (lambda m: {**m, "encoder": "../../../x"}, "outside"),
        (lambda m: {**m, "head": {"name": "linear", "kwargs": {"dim": 10**9}}}, "outside 0..16384"),
        (lambda m: {**m, "head": {"name": "linear", "kwargs": {"grid": [512, 512]}}}, "cells"),
        (lambda m: {**m, "head": 5}, "head must be an object"),
        (lambda m: {**m, "task_info": None}, "task_info"),
    ],
)
def test_a_hostile_probe_model_json_is_one_line_naming_it(tmp_path, change, words):
    """Round 3's leftover: a hostile model.json gave a traceback (or read outside the run)."""
    from radspatial.probes.evaluate import MODEL_FORMAT
    from radspatial.probes.model_meta import read_task_meta

    folder = tmp_path / "run" / "models" / "orient"
    folder.mkdir(parents=True)
    meta = {**PROBE_META, "format": MODEL_FORMAT}
    (folder / "model.json").write_text(json.dumps(change(meta)))
    with pytest.raises(ValueError, match="model.json") as exc:
        read_task_meta(folder, MODEL_FORMAT)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    (folder / "model.json").write_text(json.dumps({**meta, "encoder": "../../encoder"}))
    assert read_task_meta(folder, MODEL_FORMAT)[1].resolve() == (tmp_path / "run" / "encoder")
