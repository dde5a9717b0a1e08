"""Probe encoders and heads: the registry builds, output shapes, hf: folders, checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from radspatial.probes.encoders import (
    Features,
    create_encoder,
    list_encoders,
    load_encoder,
    read_state_dict,
    save_encoder,
)
from radspatial.probes.evaluate import ProbeModel, load_task_model, save_task_model
from radspatial.probes.heads import create_head, list_heads

FULL_SIZE = {"resnet50", "vit-b32"}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # on a shared, loaded CPU two OpenMP threads can be 30x slower than one
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_importing_probes_does_not_import_torch():
    code = "import sys, radspatial.probes; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registry_has_the_documented_encoders():
    assert {"resnet50", "vit-b32", "resnet-small", "vit-tiny"} <= set(list_encoders())
    assert list_heads() == ["both", "mlp", "transformer"]
    with pytest.raises(ValueError, match="unknown encoder 'nope'"):
        create_encoder("nope")


@pytest.mark.parametrize("name", list_encoders())
def test_encoder_returns_pooled_and_tokens(name):
    torch.manual_seed(0)
    # full-size models: the real architecture, one forward on one small image
    enc = create_encoder(name, image_size=64) if name in FULL_SIZE else create_encoder(name)
    s = enc.image_size
    batch = 1 if name in FULL_SIZE else 2
    enc.eval()
    with torch.no_grad():
        f = enc(torch.rand(batch, 3, s, s))
    assert isinstance(f, Features)
    assert f.pooled.shape == (batch, enc.dim)
    assert f.tokens.shape == (batch, enc.grid[0] * enc.grid[1], enc.dim)
    assert torch.isfinite(f.tokens).all() and torch.isfinite(f.pooled).all()
    expected_dim = {"resnet50": 2048, "vit-b32": 768}
    if name in expected_dim:
        assert enc.dim == expected_dim[name]
        assert enc.grid == (2, 2)  # stride 32 at 64 px, as at 224 px -> 7 x 7


def test_full_size_defaults_are_224_with_a_7x7_grid():
    # architecture facts without building the weights twice: the grid follows the stride
    from radspatial.probes.encoders import _resnet_grid

    assert _resnet_grid(224) == (7, 7)


def _tiny_dinov2(path):
    from transformers import Dinov2Config, Dinov2Model

    cfg = Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        image_size=28, patch_size=7,
    )  # fmt: skip
    torch.manual_seed(0)
    Dinov2Model(cfg).save_pretrained(path)
    pre = {
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.2, 0.2, 0.2],
        "crop_size": {"height": 28, "width": 28},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    return path


def test_hf_dinov2_from_a_local_folder_and_its_checkpoint(tmp_path):
    src = _tiny_dinov2(tmp_path / "dino")
    enc = create_encoder(f"hf:{src}").eval()
    assert (enc.dim, enc.grid, enc.image_size) == (32, (4, 4), 28)
    assert enc.std.flatten().tolist() == pytest.approx([0.2] * 3)
    x = torch.rand(2, 3, 28, 28)
    with torch.no_grad():
        f = enc(x)
    assert f.pooled.shape == (2, 32) and f.tokens.shape == (2, 16, 32)  # CLS dropped
    # our checkpoint carries the HF config: it loads with the source folder gone
    save_encoder(enc, tmp_path / "ck")
    for p in sorted(src.iterdir()):
        p.unlink()
    back = load_encoder(tmp_path / "ck").eval()
    with torch.no_grad():
        g = back(x)
    assert torch.equal(f.tokens, g.tokens) and torch.equal(f.pooled, g.pooled)
    # another input size: position embeddings are interpolated
    enc2 = load_encoder(tmp_path / "ck")
    assert enc2.name == enc.name


def test_hf_clip_vision_tower(tmp_path):
    from transformers import CLIPVisionConfig, CLIPVisionModel

    cfg = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        image_size=32, patch_size=8, projection_dim=16,
    )  # fmt: skip
    CLIPVisionModel(cfg).save_pretrained(tmp_path / "clip")
    enc = create_encoder(f"hf:{tmp_path / 'clip'}").eval()
    with torch.no_grad():
        f = enc(torch.rand(1, 3, 32, 32))
    assert enc.grid == (4, 4) and f.tokens.shape == (1, 16, 32) and f.pooled.shape == (1, 32)
    save_encoder(enc, tmp_path / "ck")
    assert load_encoder(tmp_path / "ck").grid == (4, 4)


@pytest.mark.parametrize("head", ["mlp", "transformer", "both"])
@pytest.mark.parametrize("shape", [(2,), (8,), (16, 16)])
def test_head_output_shapes(head, shape):
    feats = Features(torch.rand(3, 40), torch.rand(3, 6, 40))
    h = create_head(head, dim=40, grid=(2, 3), out_shape=shape)
    out = h(feats)
    assert out.shape == (3, *shape)
    again = create_head(**{"name": h.spec()["name"], **h.spec()["kwargs"]})
    assert sum(p.numel() for p in again.parameters()) == sum(p.numel() for p in h.parameters())


def test_both_is_the_sum_of_its_two_readouts():
    torch.manual_seed(0)
    feats = Features(torch.rand(2, 16), torch.rand(2, 4, 16))
    h = create_head("both", dim=16, grid=(2, 2), out_shape=(5,)).eval()
    assert torch.allclose(h(feats), h.mlp(feats) + h.transformer(feats))
    with pytest.raises(ValueError, match="mlp_ or transformer_"):
        create_head("both", dim=16, grid=(2, 2), out_shape=(5,), width=8)


@pytest.mark.parametrize("name", ["resnet-small", "vit-tiny"])
def test_encoder_checkpoint_round_trip(tmp_path, name):
    torch.manual_seed(1)
    enc = create_encoder(name, image_size=32).eval()
    x = torch.rand(2, 3, 32, 32)
    save_encoder(enc, tmp_path)
    back = load_encoder(tmp_path / "encoder.safetensors").eval()
    with torch.no_grad():
        assert torch.equal(enc(x).tokens, back(x).tokens)
    # a plain .pt state dict loads with weights_only semantics
    torch.save(enc.state_dict(), tmp_path / "encoder.pt")
    back = load_encoder(tmp_path / "encoder.pt").eval()
    with torch.no_grad():
        assert torch.equal(enc(x).pooled, back(x).pooled)


def test_a_pickled_module_is_refused(tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    with pytest.raises(Exception, match="(?i)weights"):
        read_state_dict(tmp_path / "module.pt")


def test_task_model_round_trip(tmp_path):
    torch.manual_seed(2)
    enc = create_encoder("resnet-small", image_size=32, width=8)
    head = create_head("both", dim=enc.dim, grid=enc.grid, out_shape=(16, 16))
    model = ProbeModel(enc, head).eval()
    save_encoder(enc, tmp_path / "m")
    info = {"kind": "permutation", "level": 2, "classes": None}
    save_task_model(
        tmp_path / "m", task="permutation", info=info, head=head, encoder_dir=".", image_size=32
    )
    back, meta = load_task_model(tmp_path / "m")
    assert meta["task"] == "permutation" and not back.training
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(x), back(x))
