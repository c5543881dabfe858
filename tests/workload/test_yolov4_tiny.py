"""YOLOv4-tiny against the published shapes and parameter counts (darknet's
cfg/yolov4-tiny.cfg: 21 convolutions; 6,056,606 trainable parameters at 80 classes)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from loadersearch.workload._yolov4_tiny import ANCHORS, MASKS, YOLOv4Tiny, count_parameters


def _bn_running_stats(model: nn.Module) -> int:
    # darknet/Keras count running mean and variance; num_batches_tracked is PyTorch-only.
    return sum(
        b.numel() for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")
    )


@pytest.mark.parametrize(
    ("num_classes", "trainable", "with_running_stats"),
    [(80, 6_056_606, 6_062_814), (20, 5_918_006, 5_924_214)],
)
def test_parameter_counts_match_the_published_figures(
    num_classes: int, trainable: int, with_running_stats: int
) -> None:
    model = YOLOv4Tiny(num_classes)
    assert count_parameters(model) == trainable
    assert count_parameters(model) + _bn_running_stats(model) == with_running_stats


def test_layers_match_the_cfg_21_convolutions_19_with_batchnorm_and_2_linear_heads() -> None:
    model = YOLOv4Tiny(80)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 21
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 19
    with_bias = [c for c in convs if c.bias is not None]
    assert [(c.in_channels, c.out_channels, c.kernel_size) for c in with_bias] == [
        (512, 255, (1, 1)),
        (256, 255, (1, 1)),
    ]
    leaky = [m for m in model.modules() if isinstance(m, nn.LeakyReLU)]
    assert len(leaky) == 19 and all(m.negative_slope == 0.1 for m in leaky)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("num_classes", "size", "grids"),
    [(80, 416, (13, 26)), (80, 320, (10, 20)), (80, 608, (19, 38)), (20, 416, (13, 26))],
)
def test_heads_have_the_published_shapes(num_classes: int, size: int, grids: tuple) -> None:
    model = YOLOv4Tiny(num_classes).eval()
    with torch.no_grad():
        out32, out16 = model(torch.zeros(2, 3, size, size))
    channels = 3 * (5 + num_classes)
    assert out32.shape == (2, channels, grids[0], grids[0])
    assert out16.shape == (2, channels, grids[1], grids[1])


def test_non_square_inputs_divisible_by_32_give_matching_grids() -> None:
    model = YOLOv4Tiny(3).eval()
    with torch.no_grad():
        out32, out16 = model(torch.zeros(1, 3, 64, 96))
    assert out32.shape == (1, 24, 2, 3)
    assert out16.shape == (1, 24, 4, 6)


def test_input_not_divisible_by_32_is_rejected_with_the_fix() -> None:
    with pytest.raises(ValueError, match="divisible by 32"):
        YOLOv4Tiny(3)(torch.zeros(1, 3, 100, 96))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_num_classes_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="num_classes"):
        YOLOv4Tiny(bad)  # type: ignore[arg-type]


def test_route_groups_2_group_id_1_feeds_the_second_half_of_the_channels() -> None:
    model = YOLOv4Tiny(3).eval()
    seen: dict[str, torch.Tensor] = {}
    model.stage1.conv1.register_forward_hook(lambda m, i, o: seen.__setitem__("conv1", o))
    model.stage1.conv2.register_forward_hook(lambda m, i, o: seen.__setitem__("conv2_in", i[0]))
    with torch.no_grad():
        model(torch.rand(1, 3, 64, 64))
    assert seen["conv2_in"].shape[1] == 32
    torch.testing.assert_close(seen["conv2_in"], seen["conv1"][:, 32:])


def test_count_parameters_can_include_frozen_ones() -> None:
    model = YOLOv4Tiny(20)
    for p in model.stem.parameters():
        p.requires_grad_(False)
    frozen = sum(p.numel() for p in model.stem.parameters())
    assert frozen > 0
    assert count_parameters(model) == 5_918_006 - frozen
    assert count_parameters(model, trainable_only=False) == 5_918_006


def test_anchors_and_masks_are_the_cfg_ones() -> None:
    assert ANCHORS == ((10, 14), (23, 27), (37, 58), (81, 82), (135, 169), (344, 319))
    assert MASKS == ((3, 4, 5), (1, 2, 3))
