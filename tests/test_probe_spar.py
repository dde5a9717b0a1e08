"""SPAR-Bench's probe protocol: patient A cut into z slabs (in domain), patients B and C
zero-shot, SPAR's class sets (relpos2, orient5), and the permutation's per-tile read-out."""

from __future__ import annotations

import json
from collections import Counter

import nibabel as nib
import numpy as np
import pytest
import torch

from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import Case, load_case
from radspatial.probes import build_probes
from radspatial.probes.encoders import Features
from radspatial.probes.heads import create_head
from radspatial.probes.protocol import default_cases, shared_data, slab_cases
from radspatial.probes.tasks import TASKS


def test_slabs_keep_every_voxel_where_it_was(tmp_path):
    ct, seg = bundled_example()
    cases = slab_cases(ct, seg, tmp_path, 3, "a")
    full = nib.load(ct)
    assert [c.case_id for c in cases] == ["a_z000-009", "a_z010-019", "a_z020-029"]
    for case, z0 in zip(cases, (0, 10, 20), strict=True):
        part = nib.load(case.ct)
        data = np.asarray(part.dataobj)
        assert np.array_equal(data, np.asarray(full.dataobj)[:, :, z0 : z0 + data.shape[2]])
        # voxel (5, 7, 1) of the slab is voxel (5, 7, z0 + 1) of the scan, in millimetres too
        assert np.allclose(part.affine @ [5, 7, 1, 1], full.affine @ [5, 7, z0 + 1, 1])
        assert np.array_equal(np.asarray(nib.load(case.seg).dataobj)[..., 0],
                              np.asarray(nib.load(seg).dataobj)[..., z0])  # fmt: skip


def test_default_protocol_is_patients_a_b_c(tmp_path):
    cases = default_cases(tmp_path, n_slabs=4)
    assert len(cases["in_domain"]) == 4 and cases["in_domain"][0].case_id.startswith("patient_a")
    c = load_case(cases["patient_c"][0])
    names = set(c.table.names.values())
    assert {"liver", "spleen", "kidney_left"} <= names  # total_mr ids mapped by its own table
    liver = [i for i, n in c.table.names.items() if n == "liver"][0]
    inside = c.ct[c.seg == liver]
    assert -160 <= np.median(inside) <= 240  # MR mapped onto the soft-tissue window
    assert shared_data().name == "data"


def test_spar_class_sets_are_derived_from_the_same_images(tmp_path):
    out = tmp_path / "p"
    ct, seg = bundled_example()
    build_probes([Case("ex", ct, seg)], out, tasks=["relpos2", "orient5"], size=128,
                 slice_samples={"relpos": 2}, progress=False)  # fmt: skip
    info = json.loads((out / "probes.json").read_text())["tasks"]
    assert info["relpos2"]["chance"] == 0.5 and info["orient5"]["chance"] == 0.2
    rows = [json.loads(x) for x in (out / "tasks" / "orient5.jsonl").open()]
    classes = TASKS["orient5"].classes
    want = {"B1": "standard", "B2": "rotated_90_ccw", "B3": "rotated_180", "B4": "rotated_90_cw"}
    for r in rows:
        assert classes[r["target"]] == want.get(r["meta"]["variant"], "mirrored")
        assert (out / r["image"]).exists()
    counts = Counter(classes[r["target"]] for r in rows)
    assert max(counts.values()) <= 2 * min(counts.values())  # mirrored thinned to ~1/5
    rel = [json.loads(x) for x in (out / "tasks" / "relpos2.jsonl").open()]
    assert rel and {r["meta"]["class"] for r in rel} == {"left", "right"}


@pytest.mark.parametrize("grid", [(4, 4), (8, 8)])
def test_per_tile_mlp_reads_each_tile(grid):
    """Swapping two tiles' tokens swaps the two tiles' outputs (the pooled mlp cannot)."""
    torch.manual_seed(0)
    head = create_head("mlp", dim=8, grid=grid, out_shape=(16, 16), per_slot=True).eval()
    pooled = create_head("mlp", dim=8, grid=grid, out_shape=(16, 16)).eval()
    tokens = torch.randn(1, grid[0] * grid[1], 8)
    g = tokens.view(1, grid[0], grid[1], 8)
    s = grid[0] // 4
    swapped = g.clone()  # tile 0 (top-left) <-> tile 15 (bottom-right)
    swapped[:, :s, :s], swapped[:, -s:, -s:] = g[:, -s:, -s:], g[:, :s, :s]
    swapped = swapped.reshape(1, -1, 8)
    with torch.no_grad():
        a = head(Features(tokens.mean(1), tokens))
        b = head(Features(swapped.mean(1), swapped))
        assert torch.allclose(a[0, 0], b[0, 15]) and torch.allclose(a[0, 15], b[0, 0])
        assert torch.allclose(a[0, 5], b[0, 5])
        p1 = pooled(Features(tokens.mean(1), tokens))
        p2 = pooled(Features(swapped.mean(1), swapped))
        assert torch.allclose(p1, p2, atol=1e-6)  # the mean is blind to where each tile is


def test_organ_tables_join_predictions_by_word_name(tmp_path):
    from radspatial.core.io import atomic_write_jsonl
    from radspatial.core.labels import totalseg_names
    from radspatial.probes.organ_table import organ_metrics, organ_table_md

    assert totalseg_names("intestine") == ("small_bowel",)
    assert totalseg_names("adrenal_gland") == ("adrenal_gland_left", "adrenal_gland_right")
    assert totalseg_names("liver") == ("liver",)
    data = tmp_path / "p"
    ct, seg = bundled_example()
    build_probes([Case("ex", ct, seg)], data, tasks=["localize", "permutation"], size=128,
                 progress=False)  # fmt: skip
    ev = tmp_path / "ev"
    for task in ("localize", "permutation"):
        rows = [json.loads(x) for x in (data / "tasks" / f"{task}.jsonl").open()]
        preds = []
        for r in rows:
            t = np.array(r["target"], float)
            if task == "localize":  # 0.01 of the slice off along x: 5.12 px at 512
                out = (t + [0.01, 0.0]).tolist()
            else:  # logits that put every tile where it came from, except tiles 0 and 1 swapped
                lg = np.full((16, 16), -5.0)
                lg[np.arange(16), t.astype(int)] = 5.0
                lg[[0, 1]] = lg[[1, 0]]
                out = lg.tolist()
            preds.append({"id": r["id"], "split": "test", "target": r["target"], "output": out})
        atomic_write_jsonl(ev / "predictions" / f"{task}.jsonl", preds)
    med = organ_metrics(ev, data, "localize")
    assert {"liver", "spleen", "kidney_left"} <= set(med)
    assert all(abs(v["value"] - 5.12) < 1e-6 for v in med.values())
    tile = organ_metrics(ev, data, "permutation")
    assert all(abs(v["value"] - 100 * 14 / 16) < 1e-6 for v in tile.values())
    text = organ_table_md([("oracle", ev)], data, "localize")
    assert text.startswith("| Model | Liver (n=") and "| oracle | 5.1 |" in text
