"""A faster CPU forward of a MONAI UNet (or of its plain-torch copy,
:mod:`radspatial.nets.unet_torch`) with the same numbers: the layers run in channels-last.

On a CPU, oneDNN's convolutions are 1.3-5x faster on channels-last (NHWC) tensors than on
NCHW ones (the 45-class output level of the shipped ``organs`` net, batch of 4 at 128 px, 1
thread: its transposed convolution 42 -> 8 ms, its last convolution 35 -> 27 ms), but torch's
instance norm is 3x slower on them, which is why converting the whole module to channels-last
is not faster. :func:`forward` walks the UNet's modules in their order and runs every
convolution, PReLU, concatenation and sum on channels-last tensors; an instance norm and the
PReLU after it run on its (N, H*W, C) view (statistics per sample in float64, then one
scale-and-shift and the PReLU in place); the last residual unit's ``conv(x) + x`` is one
convolution with the identity added to its kernel's centre. The logits come back
NCHW-shaped in channels-last memory, so a class-last view of them is contiguous.

Same arithmetic, another order of summation (fp32): on the shipped weights and a real slice
the softmax differs from the plain forward's by about 1e-5 (each is 3-8e-6 from a float64
forward). Where its assumptions do not hold (not a MONAI UNet, not on the CPU, in training
mode) :func:`logits` runs the module itself; a layer it does not know (another norm or
activation) runs as the module itself; and the first call per network compares its logits
with the plain forward's and keeps the plain one for good (a RuntimeWarning says so) if they
differ by more than :data:`TOLERANCE`.

torch is imported inside functions; MONAI's classes are looked at only when MONAI was imported
already (a network built by MONAI), so answering with
:class:`~radspatial.nets.unet_torch.TorchUNet` imports no MONAI.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

TOLERANCE = 1e-3  # max |fast - plain| logit (x max(1, |plain|)) accepted at the first call
_CHECKED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _kinds() -> SimpleNamespace:
    """The module classes the walk knows: :mod:`radspatial.nets.unet_torch`'s, and MONAI's
    when MONAI is imported (no MONAI network exists before that: nothing to import it for)."""
    from radspatial.nets import unet_torch as ours

    kinds = SimpleNamespace(
        unets=(ours.TorchUNet,), skips=(ours.Skip,), residuals=(ours.Residual,), sequences=()
    )
    if "monai.networks.nets" in sys.modules:
        from monai.networks.blocks import ADN, Convolution, ResidualUnit
        from monai.networks.layers import SkipConnection
        from monai.networks.nets import UNet

        kinds.unets += (UNet,)
        kinds.skips += (SkipConnection,)
        kinds.residuals += (ResidualUnit,)
        kinds.sequences = (Convolution, ADN)
    return kinds


def applies(net: Any, x: torch.Tensor) -> bool:
    """Whether the fast forward is meant for ``net`` on ``x``: a MONAI UNet or its
    :class:`~radspatial.nets.unet_torch.TorchUNet` copy in eval mode, on a CPU, with 2D
    (NCHW) input."""
    return (
        isinstance(net, _kinds().unets)
        and not net.training
        and x.device.type == "cpu"
        and x.ndim == 4
        and all(p.device.type == "cpu" for p in net.parameters())
    )


def logits(net: Any, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` in inference mode, through :func:`forward` where it applies and its first
    call agreed with the plain forward."""
    import torch

    with torch.inference_mode():
        if not applies(net, x) or _CHECKED.get(net) is False:
            return net(x)
        fast = forward(net, x)
        if net not in _CHECKED:
            plain = net(x)
            _CHECKED[net] = agrees(fast, plain)
            if not _CHECKED[net]:
                warnings.warn(
                    "unet_fast: the channels-last forward differs from the plain one on this "
                    "network; the plain forward is used",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return fast if _CHECKED[net] else plain
        return fast


def agrees(fast: torch.Tensor, plain: torch.Tensor) -> bool:
    """Same shape, and every logit within :data:`TOLERANCE` (relative above 1)."""
    if fast.shape != plain.shape:
        return False
    scale = max(1.0, float(plain.abs().max()))
    return bool(float((fast - plain).abs().max()) <= TOLERANCE * scale)


def forward(net: Any, x: torch.Tensor) -> torch.Tensor:
    """The UNet's forward on channels-last tensors (logits NCHW-shaped, channels-last)."""
    import torch

    return _run(net, x.contiguous(memory_format=torch.channels_last))


def _run(module: Any, x: torch.Tensor) -> torch.Tensor:
    """One module on a channels-last tensor; containers walk their children in order."""
    import torch

    kinds = _kinds()
    if isinstance(module, kinds.unets):
        return _run(module.model, x)
    if type(module) in (torch.nn.Sequential, *kinds.sequences):  # forward = children in order
        return _sequence(list(module), x)
    if isinstance(module, kinds.skips) and getattr(module, "mode", "cat") == "cat":
        return torch.cat([x, _run(module.submodule, x)], dim=getattr(module, "dim", 1))
    if isinstance(module, kinds.residuals):
        conv = _foldable(module)
        if conv is not None:  # conv(x) + x as one convolution
            return _channels_last(conv._conv_forward(x, *_folded(conv)))  # noqa: SLF001
        res = _run(module.residual, x)
        return _run(module.conv, x) + res
    return _leaf(module, x)


def _sequence(modules: list, x: torch.Tensor) -> torch.Tensor:
    """Modules in order, an instance norm and the PReLU after it (dropouts between them are
    the identity in eval mode) as one step (:func:`_instance_norm`)."""
    import torch

    nn = torch.nn
    mods = [m for m in modules if type(m) not in (nn.Identity, nn.Dropout, nn.Dropout2d)]
    i = 0
    while i < len(mods):
        if type(mods[i]) is nn.InstanceNorm2d and not mods[i].track_running_stats:
            act = mods[i + 1] if i + 1 < len(mods) and type(mods[i + 1]) is nn.PReLU else None
            x = _instance_norm(x, mods[i], act)
            i += 2 if act is not None else 1
        else:
            x = _run(mods[i], x)
            i += 1
    return x


def _leaf(module: Any, x: torch.Tensor) -> torch.Tensor:
    import torch
    import torch.nn.functional as F

    nn = torch.nn
    if type(module) in (nn.Identity, nn.Dropout, nn.Dropout2d):
        return x  # eval mode: dropout is the identity
    if type(module) is nn.PReLU:
        return F.prelu(x, module.weight)
    return _channels_last(module(x))  # convolutions (layout-agnostic), others: as they are


def _channels_last(y: torch.Tensor) -> torch.Tensor:
    """A 1-channel input is both layouts at once, and torch then returns NCHW: convert."""
    import torch

    return y if y.ndim != 4 else y.contiguous(memory_format=torch.channels_last)


def _instance_norm(x: torch.Tensor, norm: Any, act: Any = None) -> torch.Tensor:
    """Instance norm (then ``act``, a PReLU) of a channels-last (N, C, H, W) tensor: per
    sample, the statistics of its (H*W, C) view (mean, biased variance: as torch's instance
    norm), then one scale-and-shift of the whole batch and the PReLU in place (a per-sample
    batch norm, PReLU and copy cost 1.5x as much: 8.1 -> 5.3 ms per 4-copy forward)."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(n, h * w, c)  # a view when x is channels-last
    # float64 statistics: torch sums a (rows, C) tensor's columns naively, off by ~1e-4
    # at 16k rows in float32; instance norm on NCHW is accurate to ~1e-6
    stats = [torch.batch_norm_update_stats(rows[i].double(), None, None, 0.0) for i in range(n)]
    mean = torch.stack([m for m, _ in stats])  # (N, C)
    scale = torch.rsqrt(torch.stack([v for _, v in stats]) + norm.eps)
    if norm.weight is not None:
        scale = scale * norm.weight.double()
    shift = -mean * scale if norm.bias is None else norm.bias.double() - mean * scale
    y = torch.addcmul(shift.float()[:, None], rows, scale.float()[:, None])
    if act is not None:
        weight = act.weight  # one slope: the same function in place (outside autograd)
        in_place = weight.numel() == 1 and not y.requires_grad
        y = F.leaky_relu_(y, float(weight)) if in_place else F.prelu(y, weight)
    return y.view(n, h, w, c).permute(0, 3, 1, 2)


def _foldable(unit: Any) -> Any:
    """The Conv2d of a residual unit that is ``conv(x) + x`` with one 'same' convolution and
    an identity residual (MONAI's last unit), else None."""
    import torch

    units = list(unit.conv) if isinstance(unit.conv, torch.nn.Sequential) else []
    layers = list(units[0].children()) if len(units) == 1 else []
    conv = layers[0] if len(layers) == 1 else None
    if type(unit.residual) is not torch.nn.Identity or type(conv) is not torch.nn.Conv2d:
        return None
    k = conv.kernel_size
    same = conv.padding == (k[0] // 2, k[1] // 2) and k[0] % 2 == 1 and k[1] % 2 == 1
    plain = conv.stride == (1, 1) and conv.dilation == (1, 1) and conv.groups == 1
    square = conv.in_channels == conv.out_channels and conv.padding_mode == "zeros"
    return conv if same and plain and square else None


_FOLDED: weakref.WeakKeyDictionary[Any, tuple] = weakref.WeakKeyDictionary()


def _folded(conv: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight + the identity at the kernel's centre, bias): conv(x) + x in one convolution;
    made once per weights version."""
    import torch

    key = (conv.weight.data_ptr(), conv.weight._version)  # noqa: SLF001
    if _FOLDED.get(conv, (None,))[0] != key:
        weight = conv.weight.detach().clone()
        k = conv.kernel_size
        idx = torch.arange(weight.shape[0])
        weight[idx, idx, k[0] // 2, k[1] // 2] += 1.0
        _FOLDED[conv] = (key, weight)
    return _FOLDED[conv][1], conv.bias
