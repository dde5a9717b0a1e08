"""A mask format is one module: a reader defined outside the package (written to a temporary
folder, imported from there) declares its file ending and its loader, and ``generate`` reads
masks of that format through the command line; the dataset is the one the same labels give as
NIfTI. The generic code asks the registry (imaging/mask_formats.py); a bad file of the new
format is refused in one line naming it, exit 2, as every built-in format's."""

from __future__ import annotations

import importlib.util
import json
import sys

import nibabel as nib
import numpy as np
import pytest

from radspatial.cli import bundled_example, main
from radspatial.imaging.mask_formats import MASK_READERS, reader_for

# the whole recipe: one module, one reader; nothing in radspatial names it
PLUGIN = '''
"""Label maps saved with numpy (``np.savez(path, labels=..., affine=...)``) as masks."""

import numpy as np

from radspatial.core.errors import InputError
from radspatial.imaging.mask_formats import MaskReader, register_mask_reader


def read_labels_npz(path, table, warn):
    """(labels [i, j, k], 4x4 RAS affine); never unpickles (allow_pickle=False)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            labels, affine = npz["labels"], npz["affine"]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: not a labels .npz ({type(exc).__name__})") from None
    if labels.ndim != 3 or affine.shape != (4, 4) or not np.isfinite(affine).all():
        raise InputError(f"{path}: expected 3D labels and a finite 4x4 affine")
    return labels, affine.astype(float)


register_mask_reader(MaskReader("labels_npz", (".labels.npz",), read_labels_npz))
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mask_plugin")
    (folder / "labels_npz.py").write_text(PLUGIN)
    spec = importlib.util.spec_from_file_location("labels_npz", folder / "labels_npz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["labels_npz"] = module
    spec.loader.exec_module(module)  # registers "labels_npz"
    yield module
    MASK_READERS.remove("labels_npz")
    del sys.modules["labels_npz"]


def _rows(manifest) -> list[dict]:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    for row in rows:
        for key in ("seg", "seg_sha256"):
            row.get("source", {}).pop(key, None)
    return rows


def _generate(ct, seg, out) -> int:
    small = ["--size", "96", "--setups", "rq1,as", "--as-count", "2", "--questions", "size"]
    return main(["generate", "--ct", str(ct), "--seg", str(seg), "--out", str(out), *small])


def test_a_mask_reader_module_feeds_generate(plugin, tmp_path, capsys):
    ct, seg = bundled_example()
    img = nib.load(seg)
    npz = tmp_path / "seg.labels.npz"
    np.savez(npz, labels=np.asarray(img.dataobj), affine=img.affine)
    assert reader_for(npz).name == "labels_npz" and reader_for(seg).name == "nifti"
    assert _generate(ct, npz, tmp_path / "npz") == 0
    assert _generate(ct, seg, tmp_path / "nifti") == 0
    rows = {k: _rows(tmp_path / k / "manifest.jsonl") for k in ("npz", "nifti")}
    assert rows["npz"] and rows["npz"] == rows["nifti"]  # but for the mask's path and hash
    info = json.loads((tmp_path / "npz" / "dataset.json").read_text())
    assert '"seg_format": "labels_npz"' in json.dumps(info)
    capsys.readouterr()
    (tmp_path / "bad.labels.npz").write_bytes(b"not a zip")
    assert _generate(ct, tmp_path / "bad.labels.npz", tmp_path / "bad") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.labels.npz: not a labels .npz" in err[0]
    assert not (tmp_path / "bad").exists()
