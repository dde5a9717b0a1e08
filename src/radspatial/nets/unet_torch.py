"""The trained U-Net for inference in plain PyTorch: answering a question needs no MONAI import.

``import monai.networks.nets`` alone took ~8.5 s of a quiet plain ``agent``'s cold start (65 s
at load 22), longer than the rest of its first answer. The networks we train are MONAI UNets
(:func:`radspatial.nets.unet.build_model`: 2D, 1 input channel, kernel 3, PReLU, instance
norm, no dropout, the architecture dict of :func:`radspatial.nets.unet.architecture`);
:class:`TorchUNet` rebuilds the same layers with ``torch.nn`` alone, under the same names, so
the same state dict loads into it (strictly: a missing or extra tensor is an error) and its
forward is the same arithmetic in the same order (tests/test_agent_unet_torch.py: the
logits of the shipped weights on real CT slices equal MONAI's). MONAI stays the reference and
the training network; an architecture this module does not know (:func:`supports` False)
is built by MONAI as before.

The layout, as MONAI's UNet builds it: level ``i`` is ``Sequential(down, Skip(next level),
up)``; the bottom level is a stride-1 ``down`` unit; ``down`` is a residual unit (or one
convolution block when ``num_res_units`` is 0); ``up`` is a transposed convolution block,
followed by a 1-subunit residual unit when ``num_res_units`` > 0; at the top the last
convolution has no norm or activation (the logits). A convolution block is
``Sequential(conv, adn=Sequential(N=InstanceNorm2d, A=PReLU))``; :mod:`radspatial.nets.unet_fast`
walks these modules as it walks MONAI's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from torch import nn

from radspatial.nets.unet_config import UNET

KNOWN_KEYS = frozenset(
    {"name", "spatial_dims", "in_channels", "out_channels", "channels", "strides", "num_res_units"}
)


def supports(arch: dict[str, Any]) -> bool:
    """Whether ``arch`` (a model folder's ``architecture``) is a network :class:`TorchUNet`
    rebuilds exactly: a 2D MONAI UNet with MONAI's defaults for every field not listed."""
    channels, strides = arch.get("channels"), arch.get("strides")
    return (
        arch.get("name") == UNET
        and set(arch) <= KNOWN_KEYS
        and arch.get("spatial_dims") == 2
        and isinstance(channels, list | tuple)
        and isinstance(strides, list | tuple)
        and len(channels) >= 2
        and len(strides) == len(channels) - 1
    )


def torch_unet(arch: dict[str, Any]) -> TorchUNet | None:
    """The network of ``arch`` in plain torch, randomly initialised (load the weights next);
    None where :func:`supports` is False (build it with MONAI)."""
    return TorchUNet(arch) if supports(arch) else None


class Skip(nn.Module):
    """``cat([x, submodule(x)])`` along the channels (MONAI's ``SkipConnection``, mode cat)."""

    def __init__(self, submodule: nn.Module) -> None:
        super().__init__()
        self.submodule = submodule

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.submodule(x)], dim=1)


class Residual(nn.Module):
    """``conv(x) + residual(x)``: ``conv`` holds the subunits ``unit0``, ``unit1``, ...;
    ``residual`` is the identity, or a convolution where the stride or channels change
    (MONAI's ``ResidualUnit``)."""

    def __init__(self, conv: nn.Sequential, residual: nn.Module) -> None:
        super().__init__()
        self.conv = conv
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        res = self.residual(x)
        return self.conv(x) + res


class TorchUNet(nn.Module):
    """A MONAI ``UNet(spatial_dims=2, ...)`` with default options, in ``torch.nn`` alone
    (``arch``: a model folder's ``architecture``, see :func:`supports`)."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        if not supports(arch):
            raise ValueError(f"not a 2D UNet this module rebuilds: {arch!r:.200}")
        self.arch = dict(arch)
        self.res_units = int(arch["num_res_units"])
        channels = [int(c) for c in arch["channels"]]
        strides = [int(s) for s in arch["strides"]]
        self.model = self._level(
            int(arch["in_channels"]), int(arch["out_channels"]), channels, strides, top=True
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def _level(
        self, cin: int, cout: int, channels: list[int], strides: list[int], *, top: bool
    ) -> nn.Sequential:
        c = channels[0]
        if len(channels) > 2:
            sub = self._level(c, c, channels[1:], strides[1:], top=False)
            up_in = 2 * c
        else:
            sub = self._down(c, channels[1], 1)  # the bottom: no stride
            up_in = c + channels[1]
        return nn.Sequential(
            self._down(cin, c, strides[0]), Skip(sub), self._up(up_in, cout, strides[0], top)
        )

    def _down(self, cin: int, cout: int, stride: int) -> nn.Module:
        if self.res_units > 0:
            return residual_unit(cin, cout, stride, self.res_units)
        return conv_block(cin, cout, stride)

    def _up(self, cin: int, cout: int, stride: int, top: bool) -> nn.Module:
        conv = conv_block(cin, cout, stride, transposed=True, conv_only=top and self.res_units == 0)
        if self.res_units == 0:
            return conv
        return nn.Sequential(conv, residual_unit(cout, cout, 1, 1, last_conv_only=top))


def conv_block(
    cin: int, cout: int, stride: int, *, transposed: bool = False, conv_only: bool = False
) -> nn.Sequential:
    """A 3x3 convolution ('same' padding; transposed: the input size x stride), then instance
    norm and PReLU unless ``conv_only`` (MONAI's ``Convolution`` with ``adn_ordering="NDA"``;
    dropout 0 is left out: it holds no tensor and is the identity)."""
    if transposed:
        conv: nn.Module = nn.ConvTranspose2d(
            cin, cout, 3, stride=stride, padding=1, output_padding=stride - 1
        )
    else:
        conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
    layers: OrderedDict[str, nn.Module] = OrderedDict(conv=conv)
    if not conv_only:
        layers["adn"] = nn.Sequential(OrderedDict(N=nn.InstanceNorm2d(cout), A=nn.PReLU()))
    return nn.Sequential(layers)


def residual_unit(
    cin: int, cout: int, stride: int, subunits: int, *, last_conv_only: bool = False
) -> Residual:
    """``subunits`` convolution blocks (the first with the stride) plus the residual path:
    a 3x3 strided convolution when strided, a 1x1 one when only the channels change."""
    units: OrderedDict[str, nn.Module] = OrderedDict()
    for k in range(max(1, subunits)):
        only = last_conv_only and k == max(1, subunits) - 1
        units[f"unit{k}"] = conv_block(
            cin if k == 0 else cout, cout, stride if k == 0 else 1, conv_only=only
        )
    if stride != 1:
        residual: nn.Module = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
    elif cin != cout:
        residual = nn.Conv2d(cin, cout, 1)
    else:
        residual = nn.Identity()
    return Residual(nn.Sequential(units), residual)
