"""The channels-last forward of the ``organs`` U-Net (:mod:`radspatial.nets.unet_fast`): the
plain MONAI forward's probabilities on a real slice, other UNet shapes, the fallbacks, and the
class-last mapping back and integer grey of
:func:`radspatial.agent.localizers.organs.organs_predict.variant_probs`."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("monai") is None:  # not imported here: collecting stays quick
    pytest.skip("monai is not installed", allow_module_level=True)

from radspatial.agent.localizers.organs import organs, organs_checks, organs_predict  # noqa: E402
from radspatial.core.runtime import bundled_example  # noqa: E402
from radspatial.imaging.slices import Geometry, render_gray, to_display  # noqa: E402
from radspatial.imaging.volumes import Case, load_case  # noqa: E402
from radspatial.nets import unet, unet_fast  # noqa: E402


@pytest.fixture(scope="module")
def real_slice() -> np.ndarray:
    """A 512 px RGB slice of the bundled CT (W400/L40), liver and spleen in view."""
    ct, seg = bundled_example()
    volume = load_case(Case("example_ct_sm", ct, seg, "totalsegmentator"))
    geom = Geometry.for_slice(volume.ct.shape[:2], volume.spacing[:2], 512)
    z = volume.ct.shape[2] // 2
    gray = render_gray(to_display(volume.ct[:, :, z]), geom, (400.0, 40.0))
    return np.repeat(gray[:, :, None], 3, axis=2)


def _plain(monkeypatch) -> None:
    monkeypatch.setattr(unet_fast, "applies", lambda net, x: False)


def test_fast_forward_gives_the_plain_networks_probabilities_on_a_real_slice(
    real_slice, monkeypatch
):
    """Shipped weights, the 4 test-time copies of a real CT slice: the fast path is taken
    (channels-last logits) and its softmax equals the plain MONAI forward's to 2e-5 (each is
    3-8e-6 from a float64 forward; torch's own channels-last module 7e-6); every copy's argmax
    and the mean's argmax agree."""
    from PIL import Image

    model = organs.OrgansLocalizer().model
    small = Image.fromarray(organs_predict.grey_u8(real_slice)).resize((128, 128), Image.BILINEAR)
    x = torch.from_numpy(np.asarray(small, np.float32) / 255.0)[None, None] * 2 - 1
    batch = torch.cat([organs_checks.dihedral(x, k) for k in organs_checks.VARIANT_ORDER[:4]])
    with torch.inference_mode():
        assert unet_fast.applies(model.net, batch)
        fast = unet_fast.forward(model.net, batch)
        plain = model.net(batch)
    assert fast.is_contiguous(memory_format=torch.channels_last)
    p_fast, p_plain = torch.softmax(fast, dim=1), torch.softmax(plain, dim=1)
    assert float((p_fast - p_plain).abs().max()) < 2e-5
    assert torch.equal(p_fast.argmax(dim=1), p_plain.argmax(dim=1))

    probs, _ = organs_predict.variant_probs(model, real_slice, 4)
    _plain(monkeypatch)
    expect, _ = organs_predict.variant_probs(model, real_slice, 4)
    assert float((probs - expect).abs().max()) < 2e-5
    assert np.array_equal(probs.numpy().argmax(-1), expect.numpy().argmax(-1))
    assert np.array_equal(probs.mean(0).numpy().argmax(-1), expect.mean(0).numpy().argmax(-1))


@pytest.mark.parametrize(
    ("channels", "res_units", "classes", "size", "norm"),
    [
        ((8, 16, 32), 0, 5, 64, "instance"),  # no residual units: nothing folded
        ((8, 12, 16, 24), 2, 7, 48, "instance"),  # two subunits: the identity is not folded
        ((4, 8), 1, 3, 32, ("instance", {"affine": True})),  # affine norm, 2 levels
        ((8, 16), 1, 4, 32, "batch"),  # another norm: runs as the module itself
    ],
)
def test_other_unet_shapes_give_the_plain_forward(channels, res_units, classes, size, norm):
    """Randomly initialised UNets of other shapes (what ``agent train`` may write), an
    asymmetric input: the fast forward equals the plain one."""
    from monai.networks.nets import UNet

    torch.manual_seed(0)
    net = UNet(
        spatial_dims=2,
        in_channels=1,
        out_channels=classes,
        channels=channels,
        strides=(2,) * (len(channels) - 1),
        num_res_units=res_units,
        norm=norm,
    )
    for p in net.parameters():  # affine / batch norm parameters away from 1 and 0
        p.data.add_(0.1 * torch.randn_like(p))
    if norm == "batch":
        net.train()
        with torch.no_grad():
            net(torch.randn(4, 1, size, size))  # running statistics that are not 0 / 1
    net.eval()
    x = torch.linspace(-1, 1, 2 * size * size).reshape(2, 1, size, size) ** 3
    x[0, 0, : size // 3, : size // 4] = 0.9
    with torch.inference_mode():
        plain = net(x)
        fast = unet_fast.forward(net, x)  # not logits(): its first-call check would hide a bug
    assert fast.shape == plain.shape == (2, classes, size, size)
    assert float((fast - plain).abs().max()) < 1e-4 * max(1.0, float(plain.abs().max()))


def test_falls_back_to_the_plain_forward_where_it_does_not_apply(monkeypatch):
    from monai.networks.nets import UNet

    torch.manual_seed(1)
    net = UNet(spatial_dims=2, in_channels=1, out_channels=3, channels=(4, 8), strides=(2,))
    x = torch.randn(1, 1, 16, 16)
    net.train()  # training mode: the module itself
    assert not unet_fast.applies(net, x)
    with torch.no_grad():
        assert torch.equal(unet_fast.logits(net, x), net(x))
    other = torch.nn.Conv2d(1, 2, 3, padding=1).eval()  # not a MONAI UNet
    assert not unet_fast.applies(other, x)
    with torch.inference_mode():
        assert torch.equal(unet_fast.logits(other, x), other(x))
    # a fast forward that disagrees at the first call is never used for that network
    net.eval()
    monkeypatch.setattr(unet_fast, "forward", lambda n, t: n(t) + 1.0)
    with torch.inference_mode(), pytest.warns(RuntimeWarning, match="plain forward is used"):
        assert torch.equal(unet_fast.logits(net, x), net(x))
    with torch.inference_mode():
        monkeypatch.undo()
        assert torch.equal(unet_fast.logits(net, x), net(x))  # still the plain one


def test_undo_dihedral_last_matches_the_tensor_version_on_an_asymmetric_input():
    a = np.arange(5 * 7 * 3, dtype=np.float32).reshape(5, 7, 3)  # every entry distinct
    for k in range(8):
        y = organs_checks.dihedral(torch.from_numpy(a).permute(2, 0, 1), k)  # (C, H', W')
        expect = organs_checks.undo_dihedral(y, k).permute(1, 2, 0).numpy()
        got = organs_predict.undo_dihedral_last(y.permute(1, 2, 0).numpy(), k)
        assert np.array_equal(got, expect) and np.array_equal(got, a), k


def test_integer_grey_equals_the_rounded_float_mean():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (64, 64, 4), dtype=np.uint8)
    sums = np.arange(766)  # every channel sum 0..765, spread over r, g, b
    rgb[:12, :, :3] = 0
    flat = rgb[:12, :, :3].reshape(-1, 3)
    flat[: sums.size, 0] = np.minimum(sums, 255)
    flat[: sums.size, 1] = np.clip(sums - 255, 0, 255)
    flat[: sums.size, 2] = np.clip(sums - 510, 0, 255)
    rgb[:12, :, :3] = flat.reshape(12, 64, 3)
    expect = np.clip(rgb[:, :, :3].mean(axis=2) + 0.5, 0, 255).astype(np.uint8)
    assert np.array_equal(organs_predict.grey_u8(rgb), expect)
    grey = rng.uniform(-5, 260, (8, 8))  # float and grey inputs keep the float path
    assert np.array_equal(
        organs_predict.grey_u8(grey), np.clip(grey + 0.5, 0, 255).astype(np.uint8)
    )


def test_unet_build_model_is_what_the_fast_path_expects():
    """A model folder's architecture (``unet.architecture``) builds a net it applies to."""
    net = unet.build_model(unet.architecture(6, (8, 16, 32), 1)).eval()
    assert unet_fast.applies(net, torch.zeros(1, 1, 32, 32))


def test_bench_organs_time_only_measures_this_and_the_8_copy_reference(tmp_path, monkeypatch):
    """``benchmarks/bench_organs.py --time-only`` (the command benchmarks/RESULTS.md gives): CPU
    time of the shipped localizer and of the 8-copy reference, no held-out run."""
    import json
    import runpy
    import sys
    from pathlib import Path

    from radspatial.training import organs_data

    if not (organs_data.shared_data() / "mirp_sample").is_dir():
        pytest.skip("../shared/data/mirp_sample not here")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_organs.py"
    out = tmp_path / "t.json"
    argv = [str(script), "--time-only", "--threads", "1", "--repeats", "1", "--json", str(out)]
    threads = torch.get_num_threads()
    monkeypatch.setattr(sys, "argv", argv)
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    timed = json.loads(out.read_text())["models"]["shipped"]["cpu_512px"]
    assert timed["threads"] == 1 and timed["repeats"] == 1
    assert timed["this"]["cpu_median_ms"] > 0 and timed["ratio_cpu_median"] > 0


def test_bench_unet_fast_compares_with_the_plain_forward(monkeypatch, capsys):
    """``benchmarks/bench_unet_fast.py`` (benchmarks/RESULTS.md): both paths timed in one process,
    the same answers."""
    import json
    import runpy
    import sys
    from pathlib import Path

    from radspatial.training import organs_data

    if not (organs_data.shared_data() / "mirp_sample").is_dir():
        pytest.skip("../shared/data/mirp_sample not here")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_unet_fast.py"
    threads = torch.get_num_threads()
    monkeypatch.setattr(sys, "argv", [str(script), "--repeats", "1"])
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["same_answers"] is True
    assert report["locate"]["ratio_cpu_median"] > 0 and report["forward"]["fast"]["cpu_best_ms"] > 0
    assert unet_fast.applies.__name__ == "applies"  # the plain run's switch was put back
