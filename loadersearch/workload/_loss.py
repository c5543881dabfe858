"""The YOLOv4-tiny training loss: darknet's anchor assignment, CIoU box, BCE objectness and class.

Fully vectorised over the batch: target building uses tensor ops over all boxes at once (the only
Python loop is over the two heads), because a per-box loop would steal CPU from the DataLoader
workers and distort the very throughput loadersearch measures.

No host synchronisation on the device either: work whose result sizes a tensor (how many boxes
the most crowded image has) is done on the CPU before the copy, by :func:`target_layout` in the
collate (:func:`collate_with_layout`, in the DataLoader workers), and passed in as ``layout``;
the CIoU term avoids boolean-mask indexing (torchvision's ``complete_box_iou_loss`` uses it,
which waits for the device on every call). On CUDA a step then queues its work without
waiting, as a training step should, so the measured step costs what a training step costs.

Choices, following darknet's ``[yolo]`` layer in ``yolov4-tiny.cfg``:

- Anchors stay in pixels of the *actual* network input (not rescaled from 416), as darknet does
  when it trains at other sizes (``random=1``): at 128 px, the anchor 81x82 covers most of the
  image.
- Each box goes to the anchor (of all six) whose width/height IoU with it is best; a head takes it
  when that anchor is in its mask. With the cfg's masks, anchor 3 is in both heads (its boxes
  train both) and anchor 0 in none: a box whose best anchor is 0 (smaller than about 16 px) gets
  no positive, exactly as in darknet. ``iou_threshold`` < 1 also assigns every other masked
  anchor above it (darknet's ``iou_thresh``; 1.0, the cfg's value, turns it off).
- Decoding uses ``scale_x_y=1.05``: ``x = (sigmoid(tx) * 1.05 - 0.025 + cell_x) / grid_w``,
  ``w = exp(tw) * anchor_w / img_size``.
- Objectness target is 1 at assigned cells; predictions whose box overlaps a ground truth of the
  same image by more than ``ignore_threshold`` (cfg: 0.7) are left out of the negative term.
- Box term: mean ``1 - CIoU`` over assignments; class term: BCE over assignments and classes;
  objectness: BCE averaged over the grid, weighted per head (``obj_balance``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from loadersearch.workload._yolov4_tiny import ANCHORS, MASKS

# exp(tw) beyond this is a box thousands of times its anchor: clamp so random or diverging outputs
# cannot overflow to inf (and then NaN) in float32.
_MAX_LOG_SCALE = 8.0


def _cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    cxcy, wh = boxes[..., :2], boxes[..., 2:4]
    return torch.cat((cxcy - wh / 2, cxcy + wh / 2), dim=-1)


def target_layout(targets: torch.Tensor, batch: int) -> torch.Tensor:
    """Where each image's boxes are in ``targets`` (n, 6) of a batch of ``batch`` images: a
    (batch, most boxes in one image) long tensor of row indices into ``targets``, each image's
    boxes in their order, -1 where an image has fewer. Computed on the CPU (call it before the
    copy to the device): its width is the one number the loss needs on the host."""
    targets = targets.detach().cpu()
    img_idx = targets[:, 0].long()
    if img_idx.numel() and bool(((img_idx < 0) | (img_idx >= batch)).any()):
        raise ValueError(
            f"targets refer to image indices {sorted(set(img_idx.tolist()))} but the batch "
            f"has {batch} images: column 0 must be the index of the box's image in the batch."
        )
    counts = torch.bincount(img_idx, minlength=batch)
    width = int(counts.max()) if img_idx.numel() else 0
    order = torch.argsort(img_idx, stable=True)
    sorted_idx = img_idx[order]
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(order)) - starts[sorted_idx]
    layout = torch.full((batch, width), -1, dtype=torch.long)
    layout[sorted_idx, rank] = order
    return layout


def collate_with_layout(
    batch: list[tuple[torch.Tensor, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The dataset's collate plus the :func:`target_layout` of its targets, built where the
    batch is built (in a DataLoader worker when there are workers), so that the training step
    needs no host synchronisation."""
    from loadersearch.workload._datasets import collate

    images, targets = collate(batch)
    return images, targets, target_layout(targets, len(batch))


def _ciou_loss(boxes: torch.Tensor, gt: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """``1 - CIoU`` of xyxy box pairs (n, 4) and (n, 4), elementwise: the same formula and
    values as torchvision's ``complete_box_iou_loss(reduction="none")`` (distance-IoU plus the
    aspect-ratio term with its weight ``alpha`` taken as a constant), computed without
    boolean-mask indexing."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    gx1, gy1, gx2, gy2 = gt.unbind(-1)
    iw = torch.min(x2, gx2) - torch.max(x1, gx1)
    ih = torch.min(y2, gy2) - torch.max(y1, gy1)
    inter = torch.where((iw > 0) & (ih > 0), iw * ih, torch.zeros_like(iw))
    union = (x2 - x1) * (y2 - y1) + (gx2 - gx1) * (gy2 - gy1) - inter
    iou = inter / (union + eps)
    diag2 = (torch.max(x2, gx2) - torch.min(x1, gx1)) ** 2
    diag2 = diag2 + (torch.max(y2, gy2) - torch.min(y1, gy1)) ** 2 + eps
    centre2 = ((x2 + x1) / 2 - (gx1 + gx2) / 2) ** 2 + ((y2 + y1) / 2 - (gy1 + gy2) / 2) ** 2
    diou = 1 - iou + centre2 / diag2
    aspect = torch.atan((gx2 - gx1) / (gy2 - gy1)) - torch.atan((x2 - x1) / (y2 - y1))
    v = (4 / torch.pi**2) * aspect**2
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)
    return diou + alpha * v


def _pairwise_iou(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """IoU of xyxy boxes ``a`` (B, P, 4) with ``b`` (B, G, 4) of the same image: (B, P, G)."""
    a, b = a.unsqueeze(2), b.unsqueeze(1)
    inter_wh = (
        torch.minimum(a[..., 2:], b[..., 2:]) - torch.maximum(a[..., :2], b[..., :2])
    ).clamp(min=0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    return inter / (area_a + area_b - inter + eps)


class YoloLoss(nn.Module):
    """Loss of :class:`~loadersearch.workload._yolov4_tiny.YOLOv4Tiny` outputs against targets.

    ``forward(outputs, targets, img_size, layout=None)``: ``outputs`` is the model's pair of raw
    heads, ``targets`` a float (n_boxes, 6) tensor of ``[image index, class, cx, cy, w, h]`` with
    the box normalised to [0, 1] of the square network input of ``img_size`` pixels (n_boxes may
    be 0), ``layout`` its :func:`target_layout` on the targets' device (computed here, with a
    host synchronisation, when not given).
    Returns ``(total, {"box": ..., "obj": ..., "cls": ...})``: the scalar loss to backpropagate
    and its weighted parts (detached; they sum to ``total``). Computed in float32 even under
    autocast.
    """

    def __init__(
        self,
        num_classes: int,
        anchors: Sequence[Sequence[float]] = ANCHORS,
        masks: Sequence[Sequence[int]] = MASKS,
        *,
        scale_x_y: float = 1.05,
        ignore_threshold: float = 0.7,
        iou_threshold: float = 1.0,
        box_gain: float = 0.05,
        obj_gain: float = 1.0,
        cls_gain: float = 0.5,
        obj_balance: Sequence[float] = (0.4, 1.0),
    ):
        super().__init__()
        if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 1:
            raise ValueError(f"num_classes must be a positive integer but got {num_classes!r}.")
        anchor_t = torch.as_tensor(anchors, dtype=torch.float32)
        if anchor_t.ndim != 2 or anchor_t.shape[1] != 2 or (anchor_t <= 0).any():
            raise ValueError(
                f"anchors must be a sequence of positive (w, h) pairs but got {anchors!r}."
            )
        mask_t = torch.as_tensor(masks, dtype=torch.long)
        if mask_t.ndim != 2 or mask_t.shape[1] != 3:
            raise ValueError(f"masks must hold 3 anchor indices per head but got {masks!r}.")
        if mask_t.min() < 0 or mask_t.max() >= len(anchor_t):
            raise ValueError(
                f"masks {masks!r} refer to anchors outside 0..{len(anchor_t) - 1} of {anchors!r}."
            )
        if len(obj_balance) != len(mask_t):
            raise ValueError(
                f"obj_balance needs one weight per head ({len(mask_t)}) but got {obj_balance!r}."
            )
        if not 0.0 < ignore_threshold <= 1.0 or not 0.0 < iou_threshold <= 1.0:
            raise ValueError(
                "ignore_threshold and iou_threshold must lie in (0, 1] but got "
                f"{ignore_threshold} and {iou_threshold}."
            )
        self.num_classes = int(num_classes)
        self.scale_x_y = float(scale_x_y)
        self.ignore_threshold = float(ignore_threshold)
        self.iou_threshold = float(iou_threshold)
        self.box_gain, self.obj_gain, self.cls_gain = (
            float(box_gain),
            float(obj_gain),
            float(cls_gain),
        )
        self.obj_balance = tuple(float(b) for b in obj_balance)
        # Buffers so that .to(device) moves them; not saved in checkpoints.
        self.register_buffer("anchors", anchor_t, persistent=False)
        self.register_buffer("masks", mask_t, persistent=False)

    def forward(
        self,
        outputs: Sequence[torch.Tensor],
        targets: torch.Tensor,
        img_size: int,
        layout: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if len(outputs) != len(self.masks):
            raise ValueError(
                f"expected {len(self.masks)} head outputs (one per mask) but got {len(outputs)}."
            )
        if targets.ndim != 2 or targets.shape[1] != 6:
            raise ValueError(
                "targets must be a (n_boxes, 6) tensor of [image index, class, cx, cy, w, h] "
                f"but got shape {tuple(targets.shape)}."
            )
        device = outputs[0].device
        batch = outputs[0].shape[0]
        if layout is None:
            layout = target_layout(targets, batch)
        elif layout.ndim != 2 or layout.shape[0] != batch:
            raise ValueError(
                f"layout must be the (batch={batch}, boxes per image) target_layout of the "
                f"targets but got shape {tuple(layout.shape)}."
            )
        # Under autocast the heads may be float16: the loss (exp, BCE, CIoU) needs float32.
        with torch.autocast(device_type=device.type, enabled=False):
            return self._loss(
                [o.float() for o in outputs],
                targets.to(device).float(),
                img_size,
                layout.to(device),
            )

    def _loss(
        self,
        outputs: list[torch.Tensor],
        targets: torch.Tensor,
        img_size: int,
        layout: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        nc = self.num_classes
        device = targets.device
        # A zero-width or -height box makes CIoU's aspect term 0/0 (NaN, even at weight 0).
        targets = torch.cat((targets[:, :4], targets[:, 4:6].clamp(min=1e-6)), dim=1)
        img_idx = targets[:, 0].long()
        cls_idx = targets[:, 1].long()
        gt_xyxy = _cxcywh_to_xyxy(targets[:, 2:6])

        # Best anchor of the six for each box, by IoU of widths/heights (both centred).
        anchors_norm = self.anchors.to(device) / img_size  # anchors in pixels of this input
        gt_wh = targets[:, None, 4:6]
        inter = torch.minimum(gt_wh, anchors_norm[None]).prod(-1)
        wh_iou = inter / (gt_wh.prod(-1) + anchors_norm.prod(-1)[None] - inter + 1e-9)  # (n, A)
        best = wh_iou.argmax(dim=1)
        padded_gt = self._pad_per_image(gt_xyxy, layout)  # for the ignore mask

        zero = outputs[0].new_zeros(())
        box_loss, obj_loss, cls_loss = zero, zero, zero
        for head, (out, mask) in enumerate(zip(outputs, self.masks, strict=True)):
            b, _, gh, gw = out.shape
            _check_head(head, out, nc, img_size)
            pred = out.view(b, 3, 5 + nc, gh, gw).permute(0, 1, 3, 4, 2)  # (B, 3, gh, gw, 5+nc)
            mask = mask.to(device)
            anchors_head = anchors_norm[mask]  # (3, 2)

            pred_box = self._decoded(pred, anchors_head)

            # Assignment of (box, mask slot) pairs, all n*3 of them at once; weight 0 = unassigned.
            match = best[:, None] == mask[None, :]
            if self.iou_threshold < 1.0:
                match = match | (wh_iou[:, mask] > self.iou_threshold)
            weight = match.to(pred.dtype).reshape(-1)  # (n*3,)
            n = targets.shape[0]
            slot = torch.arange(3, device=device).repeat(n)
            t_rep = targets.repeat_interleave(3, dim=0)
            bi = img_idx.repeat_interleave(3)
            gi = (t_rep[:, 2] * gw).long().clamp(0, gw - 1)
            gj = (t_rep[:, 3] * gh).long().clamp(0, gh - 1)
            sel = pred[bi, slot, gj, gi]  # (n*3, 5+nc); all pairs, unassigned ones weighted 0
            sel_box = pred_box[bi, slot, gj, gi]
            n_pos = weight.sum().clamp(min=1.0)

            ciou = _ciou_loss(_cxcywh_to_xyxy(sel_box), gt_xyxy.repeat_interleave(3, dim=0))
            box_loss = box_loss + (ciou * weight).sum() / n_pos

            cls_target = F.one_hot(cls_idx.repeat_interleave(3), nc).to(pred.dtype)
            cls_bce = F.binary_cross_entropy_with_logits(sel[:, 5:], cls_target, reduction="none")
            cls_loss = cls_loss + (cls_bce.sum(1) * weight).sum() / (n_pos * nc)

            # Objectness: 1 where assigned (accumulate handles boxes sharing a cell), 0 elsewhere
            # except predictions that already overlap a ground truth well (ignored).
            obj_target = pred.new_zeros(b, 3, gh, gw)
            obj_target.index_put_((bi, slot, gj, gi), weight, accumulate=True)
            obj_target = obj_target.clamp(max=1.0)
            with torch.no_grad():
                iou = _pairwise_iou(_cxcywh_to_xyxy(pred_box.detach()).view(b, -1, 4), padded_gt)
                best_iou = iou.amax(dim=2) if iou.shape[2] else iou.new_zeros(iou.shape[:2])
                keep = (best_iou.view(b, 3, gh, gw) <= self.ignore_threshold) | (obj_target > 0)
            obj_bce = F.binary_cross_entropy_with_logits(
                pred[..., 4], obj_target, reduction="none"
            )
            obj_loss = obj_loss + self.obj_balance[head] * (obj_bce * keep).mean()

        parts = {
            "box": self.box_gain * box_loss,
            "obj": self.obj_gain * obj_loss,
            "cls": self.cls_gain * cls_loss,
        }
        total = parts["box"] + parts["obj"] + parts["cls"]
        return total, {k: v.detach() for k, v in parts.items()}

    def _decoded(self, pred: torch.Tensor, anchors_head: torch.Tensor) -> torch.Tensor:
        """Every prediction of one head ``(B, 3, gh, gw, 5+nc)`` decoded to a normalised
        cxcywh box ``(B, 3, gh, gw, 4)``."""
        gh, gw = pred.shape[2], pred.shape[3]
        grid_y, grid_x = torch.meshgrid(
            torch.arange(gh, device=pred.device, dtype=pred.dtype),
            torch.arange(gw, device=pred.device, dtype=pred.dtype),
            indexing="ij",
        )
        s = self.scale_x_y
        xy = torch.sigmoid(pred[..., :2]) * s - (s - 1) / 2
        cx = (xy[..., 0] + grid_x) / gw
        cy = (xy[..., 1] + grid_y) / gh
        scale = torch.exp(pred[..., 2:4].clamp(max=_MAX_LOG_SCALE))
        wh = scale * anchors_head[None, :, None, None]
        return torch.stack((cx, cy, wh[..., 0], wh[..., 1]), dim=-1)

    @staticmethod
    def _pad_per_image(boxes: torch.Tensor, layout: torch.Tensor) -> torch.Tensor:
        """(batch, most boxes in an image, 4): each image's boxes, zero-padded (a gather by the
        :func:`target_layout`, so no size is read from the device)."""
        padded = boxes[layout.clamp(min=0)]
        return padded.masked_fill((layout < 0).unsqueeze(-1), 0.0)


def _check_head(head: int, out: torch.Tensor, nc: int, img_size: int) -> None:
    """Refuse a head whose channels do not fit ``nc`` classes, or whose grid does not fit a
    square input of ``img_size`` px, naming the likely cause."""
    _, channels, gh, gw = out.shape
    if channels != 3 * (5 + nc):
        raise ValueError(
            f"head {head} has {channels} channels but {nc} classes need 3*(5+{nc}) = "
            f"{3 * (5 + nc)}: is the model built for the same num_classes as the loss?"
        )
    stride = img_size // gw
    if gh != gw or img_size % gw or stride < 8 or stride & (stride - 1):
        raise ValueError(
            f"head {head} is {gh}x{gw}, which does not fit a square input of "
            f"img_size={img_size} px: pass the size of the images fed to the model."
        )
