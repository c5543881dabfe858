"""The YOLO loss: values, gradients, anchor assignment, vectorisation and a tiny overfit."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.overrides import TorchFunctionMode

from loadersearch.workload._loss import YoloLoss, _ciou_loss, collate_with_layout, target_layout
from loadersearch.workload._yolov4_tiny import ANCHORS, YOLOv4Tiny

NC = 3


def _random_outputs(batch: int, size: int, nc: int = NC, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(batch, 3 * (5 + nc), size // s, size // s, generator=gen).requires_grad_()
        for s in (32, 16)
    ]


def _random_targets(n: int, batch: int, nc: int = NC, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    wh = torch.rand(n, 2, generator=gen) * 0.5 + 0.05
    cxcy = wh / 2 + torch.rand(n, 2, generator=gen) * (1 - wh)
    img = torch.arange(n) % batch
    cls = torch.randint(0, nc, (n,), generator=gen)
    return torch.cat((img[:, None].float(), cls[:, None].float(), cxcy, wh), dim=1)


def _box_gradient_cells(grads: list[torch.Tensor], nc: int = NC) -> set[tuple[int, ...]]:
    """(head, image, anchor slot, gy, gx) of every prediction whose box channels got a gradient."""
    cells = set()
    for head, g in enumerate(grads):
        b, _, gh, gw = g.shape
        box = g.view(b, 3, 5 + nc, gh, gw)[:, :, :4].abs().sum(2)
        cells |= {(head, *map(int, idx)) for idx in box.nonzero()}
    return cells


@pytest.mark.slow
def test_loss_is_finite_and_positive_with_random_outputs_and_boxes() -> None:
    total, parts = YoloLoss(NC)(_random_outputs(4, 128), _random_targets(10, 4), 128)
    assert total.ndim == 0 and torch.isfinite(total) and total > 0
    assert set(parts) == {"box", "obj", "cls"}
    assert all(v > 0 and not v.requires_grad for v in parts.values())
    torch.testing.assert_close(total.detach(), sum(parts.values()))


def test_a_batch_without_boxes_gives_only_an_objectness_loss_that_backpropagates() -> None:
    outputs = _random_outputs(2, 64)
    total, parts = YoloLoss(NC)(outputs, torch.zeros(0, 6), 64)
    assert torch.isfinite(total) and total > 0
    assert parts["box"] == 0 and parts["cls"] == 0 and parts["obj"] > 0
    total.backward()
    assert all(torch.isfinite(o.grad).all() and o.grad.abs().sum() > 0 for o in outputs)


def test_gradients_reach_every_model_parameter() -> None:
    torch.manual_seed(0)
    model = YOLOv4Tiny(NC)
    total, _ = YoloLoss(NC)(model(torch.rand(2, 3, 64, 64)), _random_targets(6, 2), 64)
    total.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_loss_is_float32_under_autocast_and_with_half_outputs() -> None:
    torch.manual_seed(0)
    model = YOLOv4Tiny(NC)
    targets = _random_targets(4, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs = model(torch.rand(2, 3, 64, 64))
        assert outputs[0].dtype == torch.bfloat16
        total, _ = YoloLoss(NC)(outputs, targets, 64)
    assert total.dtype == torch.float32 and torch.isfinite(total)
    half_total, _ = YoloLoss(NC)([o.detach().half() for o in outputs], targets, 64)
    assert half_total.dtype == torch.float32 and torch.isfinite(half_total)


@pytest.mark.cuda
def test_loss_runs_on_cuda_under_float16_autocast() -> None:
    model = YOLOv4Tiny(NC).cuda()
    loss_fn = YoloLoss(NC).cuda()
    targets = _random_targets(8, 4).cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        outputs = model(torch.rand(4, 3, 128, 128, device="cuda"))
        total, parts = loss_fn(outputs, targets, 128)
    assert total.dtype == torch.float32 and torch.isfinite(total)
    assert parts["box"].device.type == "cuda"
    total.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_each_box_trains_the_anchor_slots_of_its_best_anchor_on_every_head() -> None:
    # One box per image, its size exactly one of the six anchors, centred in 13x13 cell (x=i, y=3).
    size = 416
    targets = torch.tensor(
        [[i, 0, (i + 0.5) / 13, 3.5 / 13, w / size, h / size] for i, (w, h) in enumerate(ANCHORS)]
    )
    outputs = [o.detach().zero_().requires_grad_() for o in _random_outputs(6, size)]
    total, _ = YoloLoss(NC)(outputs, targets, size)
    total.backward()
    # (head, image, slot, gy, gx): head 0 (stride 32) has anchors 3,4,5, head 1 has 1,2,3; the
    # 26x26 cell of the 13x13 cell (i, 3) is (2i+1, 7). Anchor 0 is in no mask (as in darknet).
    expected = {
        (1, 1, 0, 7, 3),  # anchor 1
        (1, 2, 1, 7, 5),  # anchor 2
        (0, 3, 0, 3, 3),  # anchor 3 on the stride-32 head...
        (1, 3, 2, 7, 7),  # ...and on the stride-16 head
        (0, 4, 1, 3, 4),  # anchor 4
        (0, 5, 2, 3, 5),  # anchor 5
    }
    assert _box_gradient_cells([o.grad for o in outputs]) == expected


def test_iou_threshold_below_one_also_assigns_other_close_anchors() -> None:
    size = 416
    # An anchor-3 box (81x82): its wh-IoU with anchor 2 (37x58) is 0.32, with anchor 4 0.29.
    targets = torch.tensor([[0, 0, 3.5 / 13, 3.5 / 13, 81 / size, 82 / size]])
    outputs = [o.detach().zero_().requires_grad_() for o in _random_outputs(1, size)]
    YoloLoss(NC, iou_threshold=0.3)(outputs, targets, size)[0].backward()
    assert _box_gradient_cells([o.grad for o in outputs]) == {
        (0, 0, 0, 3, 3),
        (1, 0, 2, 7, 7),
        (1, 0, 1, 7, 7),  # anchor 2, added by the threshold
    }


def test_predictions_overlapping_a_box_are_ignored_in_the_objectness_term() -> None:
    size = 416
    # A 81x82 box; with zero outputs the stride-16 anchor-3 predictions one cell away overlap it
    # by IoU ~0.67, so a 0.5 threshold ignores them and a threshold of 1 keeps them as negatives.
    targets = torch.tensor([[0, 0, 6.5 / 13, 6.5 / 13, 81 / size, 82 / size]])
    outputs = [torch.zeros(1, 3 * (5 + NC), size // s, size // s) for s in (32, 16)]
    _, with_ignore = YoloLoss(NC, ignore_threshold=0.5)(outputs, targets, size)
    _, without = YoloLoss(NC, ignore_threshold=1.0)(outputs, targets, size)
    assert with_ignore["obj"] < without["obj"]
    assert with_ignore["box"] == without["box"] and with_ignore["cls"] == without["cls"]


class _CountTorchCalls(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.calls[getattr(func, "__name__", repr(func))] += 1
        return func(*args, **(kwargs or {}))


def test_the_loss_makes_the_same_torch_calls_for_2_or_200_boxes_so_it_has_no_per_box_loop() -> (
    None
):
    loss_fn = YoloLoss(NC)
    counts = []
    for n_boxes in (2, 200):
        with _CountTorchCalls() as mode:
            loss_fn(_random_outputs(2, 64), _random_targets(n_boxes, 2), 64)
        counts.append(mode.calls)
    assert sum(counts[0].values()) > 50  # the mode did see the loss's tensor operations
    assert counts[0] == counts[1]


def test_the_loss_does_not_depend_on_the_order_of_the_boxes() -> None:
    outputs = _random_outputs(4, 128)
    targets = _random_targets(40, 4)
    loss_fn = YoloLoss(NC)
    total, parts = loss_fn(outputs, targets, 128)
    shuffled = targets[torch.randperm(len(targets), generator=torch.Generator().manual_seed(1))]
    total2, parts2 = loss_fn(outputs, shuffled, 128)
    torch.testing.assert_close(total, total2)
    for key in parts:
        torch.testing.assert_close(parts[key], parts2[key])


@pytest.mark.slow
def test_a_tiny_model_overfitting_two_images_drives_the_loss_down() -> None:
    torch.manual_seed(0)
    model = YOLOv4Tiny(2)
    loss_fn = YoloLoss(2)
    images = torch.rand(2, 3, 64, 64)
    targets = torch.tensor(
        [[0, 1, 0.5, 0.5, 0.5, 0.6], [1, 0, 0.3, 0.3, 0.35, 0.4], [1, 1, 0.7, 0.6, 0.7, 0.8]]
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    history = []
    for _ in range(30):
        total, parts = loss_fn(model(images), targets, 64)
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        history.append({"total": total.item(), **{k: v.item() for k, v in parts.items()}})
    first = history[0]
    # The box term is the noisiest: compare the mean of the last 5 steps (0.36-0.61 over seeds).
    last = {k: sum(h[k] for h in history[-5:]) / 5 for k in first}
    assert last["total"] < 0.3 * first["total"]
    assert last["box"] < 0.8 * first["box"]
    assert last["cls"] < 0.1 * first["cls"]


def test_inputs_that_do_not_fit_are_rejected_with_the_reason() -> None:
    loss_fn = YoloLoss(NC)
    outputs = _random_outputs(2, 64)
    with pytest.raises(ValueError, match="num_classes"):
        YoloLoss(NC + 1)(outputs, _random_targets(2, 2), 64)
    with pytest.raises(ValueError, match=r"\(n_boxes, 6\)"):
        loss_fn(outputs, torch.zeros(3, 5), 64)
    with pytest.raises(ValueError, match="image indices"):
        loss_fn(outputs, _random_targets(3, 3), 64)
    with pytest.raises(ValueError, match="img_size"):
        loss_fn(outputs, _random_targets(2, 2), 100)
    with pytest.raises(ValueError, match="masks"):
        YoloLoss(NC, masks=((3, 4, 6), (1, 2, 3)))


# --------------------------------------------------------------------------- no host syncs

# Outputs of the previous implementation (torchvision's CIoU, per-image padding built on the
# targets' device with bincount/argsort and int(counts.max())), recorded with torch 2.14.1 on
# the fixed inputs of _fixed_case: the loss must not change while its syncs move to the CPU.
_PREVIOUS = {
    # case: (total, box, obj, cls, sum |grad| of each head)
    "b4_128_40boxes": (2.0050997734069824, 0.08891872316598892, 1.1310093402862549,
                       0.785171627998352, 0.44403584492829395, 0.7593556192101829),
    "b3_416_25boxes_thr": (2.047323226928711, 0.07924049347639084, 1.1311619281768799,
                           0.8369207382202148, 0.48647774977507385, 0.771673268141635),
    "b5_64_gap": (1.4482684135437012, 0.03453667089343071, 1.0994789600372314,
                  0.3142527639865875, 0.19110826618270949, 0.7202920442032337),
    "b2_96_none": (1.1401358842849731, 0.0, 1.1401358842849731, 0.0, 0.1955580580397509,
                   0.5074331159994472),
}  # fmt: skip
_CASES = {  # batch, size, boxes, seed, loss options, images left without boxes
    "b4_128_40boxes": (4, 128, 40, 11, {}, ()),
    "b3_416_25boxes_thr": (3, 416, 25, 12, {"iou_threshold": 0.3, "ignore_threshold": 0.5}, ()),
    "b5_64_gap": (5, 64, 30, 13, {}, (1, 3)),
    "b2_96_none": (2, 96, 0, 14, {}, ()),
}


def _fixed_case(name: str) -> tuple[list[torch.Tensor], torch.Tensor, int, dict]:
    batch, size, n, seed, options, empty = _CASES[name]
    outputs = _random_outputs(batch, size, seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    wh = torch.rand(n, 2, generator=gen) * 0.5 + 0.05
    cxcy = wh / 2 + torch.rand(n, 2, generator=gen) * (1 - wh)
    img = torch.randint(0, batch, (n,), generator=gen)
    cls = torch.randint(0, NC, (n,), generator=gen)
    targets = torch.cat((img[:, None].float(), cls[:, None].float(), cxcy, wh), dim=1)
    keep = torch.tensor([int(i) not in empty for i in img], dtype=torch.bool)
    return outputs, targets[keep], size, options


@pytest.mark.parametrize("name", sorted(_CASES))
@pytest.mark.parametrize("with_layout", [False, True], ids=["layout-here", "layout-from-collate"])
def test_the_loss_gives_the_previous_implementations_values(name: str, with_layout: bool):
    outputs, targets, size, options = _fixed_case(name)
    layout = target_layout(targets, outputs[0].shape[0]) if with_layout else None
    total, parts = YoloLoss(NC, **options)(outputs, targets, size, layout)
    total.backward()
    want = _PREVIOUS[name]
    got = (total.item(), *(parts[k].item() for k in ("box", "obj", "cls")))
    assert got == want[:4]  # bit for bit: the same operations on the same values
    grads = [o.grad.double().abs().sum().item() for o in outputs]
    assert grads == pytest.approx(want[4:], rel=1e-6)  # float32 sums in another order


def test_the_layout_lists_each_images_boxes_in_order_padded_with_minus_one():
    targets = torch.tensor([[2, 0, .5, .5, .1, .1], [0, 1, .5, .5, .1, .1],
                            [2, 1, .5, .5, .1, .1], [2, 0, .5, .5, .1, .1]])  # fmt: skip
    assert target_layout(targets, 4).tolist() == [[1, -1, -1], [-1, -1, -1], [0, 2, 3],
                                                  [-1, -1, -1]]  # fmt: skip
    assert target_layout(torch.zeros(0, 6), 3).shape == (3, 0)
    with pytest.raises(ValueError, match="image indices"):
        target_layout(targets, 2)


def test_the_collate_adds_the_layout_of_its_targets():
    images = [torch.zeros(3, 8, 8, dtype=torch.uint8)] * 3
    boxes = [torch.tensor([[1.0, 0.5, 0.5, 0.2, 0.2]] * 2), torch.zeros(0, 5), torch.ones(1, 5)]
    x, targets, layout = collate_with_layout(list(zip(images, boxes, strict=True)))
    assert x.shape == (3, 3, 8, 8) and targets.shape == (3, 6)
    assert torch.equal(layout, target_layout(targets, 3)) and layout.tolist()[1] == [-1, -1]


def test_our_ciou_is_torchvisions_ciou_without_its_boolean_mask():
    from torchvision.ops import complete_box_iou_loss

    gen = torch.Generator().manual_seed(5)
    a = _random_xyxy(500, gen).requires_grad_()
    b = _random_xyxy(500, gen)
    ours = _ciou_loss(a, b)
    theirs = complete_box_iou_loss(a, b, reduction="none")
    assert torch.equal(ours, theirs)
    (g_ours,) = torch.autograd.grad(ours.sum(), a)
    (g_theirs,) = torch.autograd.grad(theirs.sum(), a)
    torch.testing.assert_close(g_ours, g_theirs, rtol=1e-5, atol=1e-7)


def _random_xyxy(n: int, gen: torch.Generator) -> torch.Tensor:
    lo = torch.rand(n, 2, generator=gen)
    return torch.cat((lo, lo + torch.rand(n, 2, generator=gen) * 0.5 + 1e-3), dim=1)


class _HostSyncs(TorchFunctionMode):
    """Records the calls that make a CUDA host wait for the device: reading a value
    (item/tolist/bool/int/float) and ops whose output size depends on the data (nonzero,
    boolean-mask indexing, bincount, unique...). On a CPU they are cheap, but the same code on
    a GPU stalls the host every step."""

    SYNCING = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero",
               "bincount", "unique", "masked_select", "argwhere", "any", "all"}  # fmt: skip

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = getattr(func, "__name__", repr(func))
        if name in self.SYNCING:
            self.seen.append(name)
        if name in ("__getitem__", "__setitem__", "index_put_", "index_put"):
            index = args[1] if len(args) > 1 else None
            parts = index if isinstance(index, (tuple, list)) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                self.seen.append(f"{name}[bool mask]")
        return func(*args, **(kwargs or {}))


def test_the_sync_detector_sees_what_the_previous_loss_did():
    with _HostSyncs() as mode:
        counts = torch.bincount(torch.tensor([0, 1, 1]))
        int(counts.max())
        x = torch.zeros(3)
        x[x > 0] = 1.0
    assert {"bincount", "__int__", "__setitem__[bool mask]"} <= set(mode.seen)


def test_the_loss_with_the_collates_layout_makes_no_host_sync():
    outputs, targets, size, options = _fixed_case("b4_128_40boxes")
    layout = target_layout(targets, 4)  # on the CPU, before the copy (here: in the collate)
    loss_fn = YoloLoss(NC, **options)
    with _HostSyncs() as mode:
        total, _ = loss_fn(outputs, targets, size, layout)
        total.backward()
    assert mode.seen == []


@pytest.mark.cuda
def test_on_cuda_the_training_loss_never_waits_for_the_device():
    outputs, targets, size, _ = _fixed_case("b4_128_40boxes")
    layout = target_layout(targets, 4)
    outputs = [o.detach().cuda().requires_grad_() for o in outputs]
    targets, layout = targets.cuda(), layout.cuda()
    loss_fn = YoloLoss(NC).cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        total, _ = loss_fn(outputs, targets, size, layout)
        total.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert total.item() == pytest.approx(_PREVIOUS["b4_128_40boxes"][0], rel=1e-5)
