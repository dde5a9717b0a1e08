"""The plain-torch U-Net (:mod:`radspatial.nets.unet_torch`) against MONAI's: the shipped weights
on real slices of the bundled CT give MONAI's logits and argmax (plain and channels-last
forward), other shapes load the same state dicts and give the same logits, an architecture it
does not know is left to MONAI, and plain ``agent`` answers in a fresh process without
importing MONAI."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
if importlib.util.find_spec("monai") is None:  # not imported here: collecting stays quick
    pytest.skip("monai is not installed", allow_module_level=True)

from radspatial.agent.localizers.organs import organs, organs_checks, organs_predict  # noqa: E402
from radspatial.core.runtime import bundled_example  # noqa: E402
from radspatial.imaging.slices import Geometry, render_gray, to_display  # noqa: E402
from radspatial.imaging.volumes import Case, load_case  # noqa: E402
from radspatial.nets import unet, unet_fast, unet_torch  # noqa: E402


@pytest.fixture(scope="module")
def real_slices() -> list[np.ndarray]:
    """Three 512 px RGB slices of the bundled CT (W400/L40): upper, middle, lower abdomen."""
    ct, seg = bundled_example()
    volume = load_case(Case("example_ct_sm", ct, seg, "totalsegmentator"))
    geom = Geometry.for_slice(volume.ct.shape[:2], volume.spacing[:2], 512)
    n = volume.ct.shape[2]
    out = []
    for z in (n // 3, n // 2, 2 * n // 3):
        gray = render_gray(to_display(volume.ct[:, :, z]), geom, (400.0, 40.0))
        out.append(np.repeat(gray[:, :, None], 3, axis=2))
    return out


def _monai_shipped() -> torch.nn.Module:
    """The shipped weights in MONAI's UNet (the network they were trained as)."""
    from safetensors.torch import load_file

    folder = organs.shipped_model_dir()
    net = unet.build_model(unet.read_config(folder)["architecture"])
    net.load_state_dict(load_file(str(folder / unet.WEIGHTS)))
    return net.eval()


def test_shipped_weights_give_monais_logits_on_real_ct_slices(real_slices):
    """The network answering loads (:class:`TorchUNet`) on the 4 re-oriented copies of three
    real slices: its plain forward gives MONAI's logits (the same operations in the same order:
    equal to 1e-6), the channels-last forward the agent runs gives MONAI's probabilities to
    2e-5, and every argmax map is identical."""
    model = organs.OrgansLocalizer().model
    assert isinstance(model.net, unet_torch.TorchUNet)
    reference = _monai_shipped()
    copies = []
    for image in real_slices:
        small = Image.fromarray(organs_predict.grey_u8(image)).resize((128, 128), Image.BILINEAR)
        x = torch.from_numpy(np.asarray(small, np.float32) / 255.0)[None, None] * 2 - 1
        copies += [organs_checks.dihedral(x, k) for k in organs_checks.VARIANT_ORDER[:4]]
    batch = torch.cat(copies)
    with torch.inference_mode():
        expect = reference(batch)
        plain = model.net(batch)
        fast = unet_fast.forward(model.net, batch)
    assert plain.shape == expect.shape == (12, len(model.classes), 128, 128)
    assert torch.allclose(plain, expect, rtol=0, atol=1e-6)
    assert torch.equal(plain.argmax(dim=1), expect.argmax(dim=1))
    p_fast, p_expect = torch.softmax(fast, dim=1), torch.softmax(expect, dim=1)
    assert float((p_fast - p_expect).abs().max()) < 2e-5
    assert torch.equal(p_fast.argmax(dim=1), p_expect.argmax(dim=1))
    assert len(torch.unique(expect.argmax(dim=1))) > 10  # real anatomy: many classes in view


@pytest.mark.parametrize(
    ("classes", "channels", "res_units", "size"),
    [(5, (8, 16, 32), 0, 32), (7, (8, 12, 16, 24), 2, 48), (3, (4, 8), 1, 16), (4, (6, 6), 3, 8)],
)
def test_other_shapes_load_monais_state_dict_and_give_its_logits(
    classes, channels, res_units, size
):
    """What ``agent train`` may write: no residual units, several subunits, two levels, equal
    channels (a 1x1-free bottom); the state dict loads strictly, the logits are MONAI's."""
    arch = unet.architecture(classes, channels, res_units)
    torch.manual_seed(0)
    reference = unet.build_model(arch).eval()
    net = unet_torch.torch_unet(arch)
    assert net is not None
    net.load_state_dict(reference.state_dict(), strict=True)
    net.eval()
    x = torch.linspace(-1, 1, 2 * size * size).reshape(2, 1, size, size) ** 3
    x[0, 0, : size // 3, : size // 4] = 0.9  # asymmetric
    with torch.inference_mode():
        expect = reference(x)
        assert torch.allclose(net(x), expect, rtol=0, atol=1e-6)
        fast = unet_fast.forward(net, x)
    assert float((fast - expect).abs().max()) < 1e-4 * max(1.0, float(expect.abs().max()))


def test_an_architecture_it_does_not_rebuild_is_left_to_monai(tmp_path):
    arch = unet.architecture(3, (4, 8), 1)
    assert unet_torch.supports(arch)
    for other in ({**arch, "kernel_size": 5}, {**arch, "spatial_dims": 3}, {**arch, "name": "x"}):
        assert not unet_torch.supports(other) and unet_torch.torch_unet(other) is None
    with pytest.raises(ValueError, match="not a 2D UNet"):
        unet_torch.TorchUNet({**arch, "norm": "batch"})
    # the weights of a MONAI net do not load into a wrongly shaped copy: strict loading says so
    wrong = unet_torch.TorchUNet(unet.architecture(3, (4, 8), 2))
    with pytest.raises(RuntimeError, match="Missing key"):
        wrong.load_state_dict(unet.build_model(arch).state_dict())


def test_plain_agent_answers_without_importing_monai(tmp_path, monkeypatch, capsys):
    """``benchmarks/bench_cold_start.py --repeats 1`` (benchmarks/RESULTS.md): ``radspatial agent``
    on a plain CT slice (organ names, no markers) in a fresh process, once as shipped and once
    with the network built by MONAI: the same answer (both organs located by the network), and the
    shipped path imported no ``monai`` module (``sys.modules`` of the child)."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cold_start.py"
    out = tmp_path / "cold.json"
    monkeypatch.setattr(sys, "argv", [str(script), "--repeats", "1", "--json", str(out)])
    runpy.run_path(str(script), run_name="__main__")
    report = json.loads(out.read_text())
    assert report["this"]["monai_modules"] == 0  # answered without importing MONAI
    assert report["monai"]["monai_modules"] > 0  # the reference path really is MONAI's
    assert report["same_answers"] is True
    assert report["this"]["answer"].startswith("answer: yes (x(subject) - x(reference) =")
    assert report["ratio_cpu_median"] > 0 and "this / monai" in capsys.readouterr().out
