"""YOLOv4-tiny, built layer by layer from darknet's ``cfg/yolov4-tiny.cfg``.

The network is the real training workload whose data loading loadersearch tunes, so it must
cost what the published model costs: 21 convolutions (19 with BatchNorm + LeakyReLU(0.1) and
no bias, two 1x1 linear head convolutions with a bias), the CSPDarknet53-tiny backbone with its
``route groups=2 group_id=1`` channel split, maxpools and the FPN neck. For 80 classes it has
6,056,606 trainable parameters, exactly as darknet and the Keras port report.

Comments name the darknet layer index (0-based, as darknet prints them) of each block.
"""

from __future__ import annotations

import torch
from torch import nn

# (w, h) anchors in network-input pixels, as in the cfg (given there for a 416x416 input).
ANCHORS: tuple[tuple[int, int], ...] = (
    (10, 14),
    (23, 27),
    (37, 58),
    (81, 82),
    (135, 169),
    (344, 319),
)
# Anchor indices used by each head: first the stride-32 head, then the stride-16 head. As in the
# cfg, anchor 0 is used by no head and anchor 3 by both.
MASKS: tuple[tuple[int, ...], ...] = ((3, 4, 5), (1, 2, 3))
# Output strides of the two heads, in the order ``forward`` returns them.
STRIDES: tuple[int, int] = (32, 16)


class ConvBnLeaky(nn.Module):
    """A darknet ``[convolutional]`` with ``batch_normalize=1`` and ``activation=leaky``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1):
        super().__init__()
        # darknet's pad=1 means "pad by size/2", i.e. 'same' padding for odd kernels.
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, stride, kernel_size // 2, bias=False
        )
        self.bn = nn.BatchNorm2d(out_channels)
        self.act = nn.LeakyReLU(0.1, inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class CSPTinyBlock(nn.Module):
    """One CSP-tiny stage of the backbone (darknet layers 2-9, 10-17 and 18-24).

    Returns the stage output after the maxpool, and the pre-concatenation 1x1 output, which the
    last stage feeds to the FPN neck (darknet layer 23).
    """

    def __init__(self, in_channels: int, channels: int, pool: bool = True):
        super().__init__()
        self.conv1 = ConvBnLeaky(in_channels, channels, 3)  # 2 / 10 / 18
        # route groups=2 group_id=1 (3 / 11 / 19) keeps the second half: channels // 2
        self.conv2 = ConvBnLeaky(channels // 2, channels // 2, 3)  # 4 / 12 / 20
        self.conv3 = ConvBnLeaky(channels // 2, channels // 2, 3)  # 5 / 13 / 21
        self.conv4 = ConvBnLeaky(channels, channels, 1)  # 7 / 15 / 23
        self.pool = nn.MaxPool2d(2, 2) if pool else nn.Identity()  # 9 / 17 / 25

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.conv1(x)
        half = x.shape[1] // 2
        a = self.conv2(x[:, half:])  # group_id=1: the SECOND half of the channels
        b = self.conv3(a)
        feat = self.conv4(torch.cat((b, a), dim=1))  # route -1,-2
        out = torch.cat((x, feat), dim=1)  # route -6,-1
        return self.pool(out), feat


class YOLOv4Tiny(nn.Module):
    """YOLOv4-tiny for ``num_classes`` classes and any input size divisible by 32.

    ``forward`` takes a float batch (B, 3, H, W) and returns the raw (not decoded) head outputs
    ``(stride-32 head (B, 3*(5+nc), H/32, W/32), stride-16 head (B, 3*(5+nc), H/16, W/16))``;
    channels are laid out per anchor as (tx, ty, tw, th, objectness, class logits...), as darknet
    does. :class:`loadersearch.workload._loss.YoloLoss` consumes them.
    """

    def __init__(self, num_classes: int = 80):
        super().__init__()
        if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 1:
            raise ValueError(f"num_classes must be a positive integer but got {num_classes!r}.")
        self.num_classes = int(num_classes)
        head_channels = 3 * (5 + self.num_classes)

        self.stem = nn.Sequential(ConvBnLeaky(3, 32, 3, 2), ConvBnLeaky(32, 64, 3, 2))  # 0, 1
        self.stage1 = CSPTinyBlock(64, 64)  # 2-9
        self.stage2 = CSPTinyBlock(128, 128)  # 10-17
        self.stage3 = CSPTinyBlock(256, 256)  # 18-25
        self.conv26 = ConvBnLeaky(512, 512, 3)
        self.conv27 = ConvBnLeaky(512, 256, 1)
        # stride-32 head: 28, 29 (linear, with bias), yolo 30
        self.head32 = nn.Sequential(
            ConvBnLeaky(256, 512, 3), nn.Conv2d(512, head_channels, 1, bias=True)
        )
        # neck: route -4 (= 27), 32, upsample 33, route -1,23 (34)
        self.conv32 = ConvBnLeaky(256, 128, 1)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        # stride-16 head: 35, 36 (linear, with bias), yolo 37
        self.head16 = nn.Sequential(
            ConvBnLeaky(128 + 256, 256, 3), nn.Conv2d(256, head_channels, 1, bias=True)
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.ndim != 4 or x.shape[1] != 3 or x.shape[2] % 32 or x.shape[3] % 32:
            raise ValueError(
                f"YOLOv4Tiny expects a (B, 3, H, W) batch with H and W divisible by 32 but got "
                f"shape {tuple(x.shape)}; resize or letterbox the images to e.g. 416x416."
            )
        x = self.stem(x)
        x, _ = self.stage1(x)
        x, _ = self.stage2(x)
        x, feat23 = self.stage3(x)
        p5 = self.conv27(self.conv26(x))
        out32 = self.head32(p5)
        up = self.upsample(self.conv32(p5))
        out16 = self.head16(torch.cat((up, feat23), dim=1))
        return out32, out16


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameters of ``model`` (only those with ``requires_grad`` by default)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
