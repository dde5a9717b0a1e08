"""SPAR-Bench's permutation task as the paper words it (context-free organ tiles, a fresh tile
order per training step, scoring that treats identical tiles as interchangeable) and the
symmetry probe with the organ mask as an input channel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import Case
from radspatial.probes import build_probes
from radspatial.probes.data import ProbeSample
from radspatial.probes.evaluate import task_metrics, tile_groups
from radspatial.probes.fitting import reshuffle_tiles
from radspatial.probes.render import crop_square, shuffle_tiles

INFO = {"kind": "permutation", "level": 2}


def _scene() -> tuple[np.ndarray, np.ndarray]:
    """A 20 x 20 slice, brightness rising to the right and down, and an L-shaped organ (id 3)
    whose 8 x 8 bounding box sits in the upper left: rows 2-9, columns 4-11."""
    gray = (np.arange(20)[:, None] * 10 + np.arange(20)[None, :] + 20).astype(np.uint8)
    labels = np.zeros((20, 20), np.int16)
    labels[2:10, 4:6] = 3  # the L's upright, on the left
    labels[8:10, 4:12] = 3  # its foot, at the bottom
    labels[12:16, 12:16] = 5  # another organ, never inside organ 3's crop
    return gray, labels


def test_context_removal_keeps_the_organ_in_place_and_blacks_the_rest():
    gray, labels = _scene()
    keep = crop_square(gray, labels, 3, 8)  # the box is 8 x 8: no resize, pixel for pixel
    gone = crop_square(gray, labels, 3, 8, "remove")
    assert np.array_equal(keep, gray[2:10, 4:12])  # not flipped: top-left is the box's top-left
    inside = labels[2:10, 4:12] == 3
    assert np.array_equal(gone[inside], keep[inside]) and not gone[~inside].any()
    assert gone[0, 0] == gray[2, 4] and gone[0, 7] == 0 and gone[7, 7] == gray[9, 11]


def test_reshuffle_gives_a_fresh_order_of_the_same_tiles():
    rng = np.random.default_rng(0)
    originals = [rng.integers(0, 256, (16, 16), dtype=np.uint8) for _ in range(2)]
    perms = [rng.permutation(16) for _ in range(2)]
    shown = np.stack([shuffle_tiles(o, p) for o, p in zip(originals, perms, strict=True)])
    x = torch.from_numpy(np.repeat(shown[:, None], 3, axis=1))
    out, new = reshuffle_tiles(x, torch.tensor(np.array(perms)), torch.Generator().manual_seed(1))
    for b in range(2):
        want = shuffle_tiles(originals[b], new[b].numpy())  # the renderer's own convention
        assert all(np.array_equal(out[b, c].numpy(), want) for c in range(3))
        assert sorted(new[b].tolist()) == list(range(16))
    assert not torch.equal(new, torch.tensor(np.array(perms)))


def test_restored_accuracy_counts_identical_tiles_as_interchangeable(tmp_path):
    rng = np.random.default_rng(1)
    crop = rng.integers(1, 256, (16, 16), dtype=np.uint8)
    crop[:4] = 0  # the top row of tiles (positions 0-3) is blank, as outside a removed organ
    perm = rng.permutation(16)
    path = tmp_path / "s.png"
    Image.fromarray(shuffle_tiles(crop, perm)).convert("RGB").save(path)
    sample = ProbeSample("s", "c", "test", path, perm.tolist(), {})
    groups = tile_groups([sample])
    blank = [i for i in range(16) if perm[i] < 4]  # shown positions holding blank tiles
    assert len(set(groups[0, blank])) == 1 and len(set(groups[0])) == 13

    def score(assign: np.ndarray) -> dict:
        logits = np.full((1, 16, 16), -9.0)
        logits[0, np.arange(16), assign] = 9.0
        return task_metrics("permutation", INFO, logits, perm[None], groups)

    right = score(perm)
    assert right["permutation_accuracy"] == right["restored_accuracy"] == 1.0
    two_blanks = perm.copy()
    two_blanks[[blank[0], blank[1]]] = two_blanks[[blank[1], blank[0]]]
    m = score(two_blanks)  # the restored crop is the same picture
    assert m["permutation_accuracy"] == 0.0 and m["tile_accuracy"] == 14 / 16
    assert m["restored_accuracy"] == 1.0 and m["restored_tile_accuracy"] == 1.0
    other = next(i for i in range(16) if perm[i] >= 4)
    mixed = perm.copy()
    mixed[[blank[0], other]] = mixed[[other, blank[0]]]
    m = score(mixed)  # a blank tile where tissue was: wrong either way
    assert m["restored_accuracy"] == 0.0 and m["restored_tile_accuracy"] == 14 / 16


def test_symmetry_mask_marks_the_pair_on_the_same_samples(tmp_path):
    out = tmp_path / "p"
    ct, seg = bundled_example()
    build_probes([Case("ex", ct, seg)], out, tasks=["symmetry", "symmetry_mask"], size=128,
                 progress=False)  # fmt: skip
    rows = {t: [json.loads(x) for x in (out / "tasks" / f"{t}.jsonl").open()]
            for t in ("symmetry", "symmetry_mask")}  # fmt: skip
    plain, masked = rows["symmetry"], rows["symmetry_mask"]
    assert plain and [r["target"] for r in plain] == [r["target"] for r in masked]
    info = json.loads((out / "probes.json").read_text())["tasks"]["symmetry_mask"]
    assert info["chance"] == 1 / 3 and info["classes"] == ["left", "right", "equal"]
    for a, b in zip(plain, masked, strict=True):
        img, msk = (np.asarray(Image.open(out / r["image"])) for r in (a, b))
        assert np.array_equal(img[..., :2], msk[..., :2])  # the slice itself is unchanged
        blue = msk[..., 2] == 255
        assert set(np.unique(msk[..., 2])) <= {0, 255} and blue.any()
        # radiological view: the patient's left is on the image's right
        left, right = blue[:, 64:].sum(), blue[:, :64].sum()
        area_l, area_r = b["meta"]["area_px"]
        assert abs(left - area_l) <= 0.15 * area_l + 4 and abs(right - area_r) <= 0.15 * area_r + 4


def test_removed_context_builds_the_same_crops_with_the_surroundings_black(tmp_path):
    ct, seg = bundled_example()
    metas, crops = {}, {}
    for context in ("keep", "remove"):
        out = Path(tmp_path / context)
        metas[context] = build_probes([Case("ex", ct, seg)], out, tasks=["localize"], size=128,
                                      context=context, progress=False)  # fmt: skip
        rows = [json.loads(x) for x in (out / "tasks" / "localize.jsonl").open()]
        crops[context] = {r["id"]: np.asarray(Image.open(out / r["image"])) for r in rows}
    assert "context" not in metas["keep"]["config"]  # earlier builds' probes.json unchanged
    assert metas["remove"]["config"]["context"] == "remove"
    assert crops["keep"].keys() == crops["remove"].keys()
    blacked = 0
    for key, kept in crops["keep"].items():
        gone = crops["remove"][key]
        # a pixel is the kept one or black; where the resize blends the mask's edge, darker
        assert (gone.astype(int) <= kept.astype(int) + 1).all()
        assert ((gone == kept) | (gone == 0)).mean() > 0.5  # small organs are upscaled
        blacked += int(((gone == 0) & (kept > 0)).any())
    assert blacked > len(crops["keep"]) // 2  # most crops lose some surrounding tissue


@pytest.mark.parametrize("name", ["vit-b32"])  # resnet50: 25 s on a loaded CPU, forward-tested
def test_full_size_encoders_take_a_reshuffled_permutation_step(name):
    """The GPU rows' configurations (``--encoders resnet50 vit-b32 --device cuda``) on the CPU at
    32 px: the real architecture, the per-tile read-out, one reshuffled training step."""
    from radspatial.probes.encoders import create_encoder
    from radspatial.probes.fitting import loss_fn
    from radspatial.probes.heads import create_head
    from radspatial.probes.train import TrainConfig

    assert TrainConfig(encoder=name, head="mlp", device="cuda").device == "cuda"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    enc = create_encoder(name, image_size=32)  # one 32 px patch: the cost is the weights
    head = create_head("mlp", dim=enc.dim, grid=enc.grid, out_shape=(16, 16), per_slot=True)
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    x, y = reshuffle_tiles(images, torch.stack([torch.randperm(16) for _ in range(2)]), gen)
    params = [*enc.parameters(), *head.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)
    loss = loss_fn("permutation", head(enc(x.float() / 255)), y)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and all(p.grad is not None for p in head.parameters())


def test_dihedral_reshuffle_shows_a_turned_or_mirrored_crop_with_matching_targets():
    """The tiles as reshuffled, put back by their new targets, give one of the 8 symmetries of
    the original crop (an asymmetric gradient: a wrong flip or turn would not match)."""
    crop = (np.arange(16)[:, None] * 16 + np.arange(16)[None, :]).astype(np.uint8)
    views = [np.rot90(crop, k) for k in range(4)]
    views += [v[:, ::-1] for v in views]  # dihedral_views: turn by k * 90 degrees, then mirror
    perm = np.random.default_rng(0).permutation(16)
    shown = np.repeat(shuffle_tiles(crop, perm)[None, None], 3, axis=1).repeat(64, axis=0)
    targets = torch.tensor(np.tile(perm, (64, 1)))
    out, new = reshuffle_tiles(
        torch.from_numpy(shown), targets, torch.Generator().manual_seed(2), dihedral=True
    )
    seen = set()
    for b in range(64):
        restored = np.empty_like(crop)
        for i, p in enumerate(new[b].tolist()):  # shown tile i belongs at position p
            r, c = divmod(i, 4)
            pr, pc = divmod(p, 4)
            tile = out[b, 0, r * 4 : r * 4 + 4, c * 4 : c * 4 + 4].numpy()
            restored[pr * 4 : pr * 4 + 4, pc * 4 : pc * 4 + 4] = tile
        match = [k for k, v in enumerate(views) if np.array_equal(restored, v)]
        assert len(match) == 1
        seen.add(match[0])
    assert seen == set(range(8))  # every rotation and mirror image is drawn


def test_set_transformer_reads_each_tile_and_follows_the_tiles():
    """The permutation's transformer read-out (``per_slot``): shuffling the tiles' tokens
    shuffles the outputs the same way (no shown-position code), and one tile's output depends
    on the other tiles (they attend to each other, unlike the per-tile mlp)."""
    from radspatial.probes.encoders import Features
    from radspatial.probes.heads import create_head

    torch.manual_seed(0)
    head = create_head("transformer", dim=8, grid=(8, 8), out_shape=(16, 16), per_slot=True)
    head.eval()
    tokens = torch.randn(1, 64, 8)

    def tiles_to_grid(t: torch.Tensor) -> torch.Tensor:  # (1, 16, 4, 8) 2 x 2 tokens per tile
        return t.view(1, 4, 4, 2, 2, 8).permute(0, 1, 3, 2, 4, 5).reshape(1, 64, 8)

    tiles = tokens.view(1, 4, 2, 4, 2, 8).permute(0, 1, 3, 2, 4, 5).reshape(1, 16, 4, 8)
    assert torch.equal(tiles_to_grid(tiles), tokens)
    order = torch.randperm(16)
    changed = tiles.clone()
    changed[:, 3] = torch.randn(4, 8)
    with torch.no_grad():
        out = head(Features(tokens.mean(1), tokens))
        moved = head(Features(tokens.mean(1), tiles_to_grid(tiles[:, order])))
        other = head(Features(tokens.mean(1), tiles_to_grid(changed)))
    assert out.shape == (1, 16, 16)
    assert torch.allclose(moved[0], out[0, order], atol=1e-5)
    assert not torch.allclose(other[0, 0], out[0, 0], atol=1e-4)  # tile 0 sees tile 3
    assert not hasattr(head, "queries") and not hasattr(head, "pos")
