"""The training augmentation of the popular PyTorch YOLOv4-tiny recipe (bubbliiiing's port).

This is the CPU work each DataLoader worker does per sample, so it follows that recipe's steps
and their cost (PIL resizes, a full-size HSV round trip), not a cheaper approximation:

* :func:`random_resize_paste`: aspect jitter ``U(0.7,1.3)/U(0.7,1.3)``, scale ``U(0.25,2)``,
  bicubic resize, paste at a random offset on a gray (128,128,128) square canvas, horizontal
  flip with p=0.5.
* :func:`mosaic`: four images, each jittered and flipped, cut together around a random
  centre (used with p=0.5 when mosaic is on).
* :func:`hsv_jitter`: hue/saturation/value gains ``1 + U(-1,1) * (0.1, 0.7, 0.4)`` (as one
  RGB colour matrix, as fast as the recipe's OpenCV HSV round trip).
* :func:`letterbox`: without augmentation, a plain aspect-preserving resize centred on gray.

Boxes travel as float arrays ``(n, 5)`` ``[class, x1, y1, x2, y2]`` in pixels of the current
image; every step transforms them with the image, clips them to the canvas and drops boxes
narrower or shorter than :data:`MIN_BOX_PX`. The box arithmetic is a scale, a shift and a
mirror, done in numpy: torchvision's ``tv_tensors.BoundingBoxes`` would give the same numbers
with a per-call dispatch overhead that is a real cost at hundreds of samples/s per core.

All randomness comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

GRAY = (128, 128, 128)
MIN_BOX_PX = 1.0  # boxes at most this wide or tall after augmentation are dropped
JITTER = 0.3  # aspect jitter: U(1-J, 1+J) / U(1-J, 1+J)
SCALE = (0.25, 2.0)
HSV_GAINS = (0.1, 0.7, 0.4)


def _clip_and_filter(boxes: np.ndarray, w: float, h: float, x0=0.0, y0=0.0) -> np.ndarray:
    """Clip [x1,y1,x2,y2] to the rectangle (x0, y0)-(w, h); drop boxes of MIN_BOX_PX or less."""
    if len(boxes) == 0:
        return boxes
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(x0, w)
    boxes[:, [2, 4]] = boxes[:, [2, 4]].clip(y0, h)
    keep = ((boxes[:, 3] - boxes[:, 1]) > MIN_BOX_PX) & ((boxes[:, 4] - boxes[:, 2]) > MIN_BOX_PX)
    return boxes[keep]


def _hflip(image: Image.Image, boxes: np.ndarray) -> tuple[Image.Image, np.ndarray]:
    w = image.width
    if len(boxes):
        boxes[:, [1, 3]] = w - boxes[:, [3, 1]]
    return image.transpose(Image.FLIP_LEFT_RIGHT), boxes


def _jittered_size(rng: np.random.Generator, iw: int, ih: int, target: int, scale: float):
    """New (w, h) after aspect jitter, with the longer side ``scale * target``."""
    new_ar = iw / ih * rng.uniform(1 - JITTER, 1 + JITTER) / rng.uniform(1 - JITTER, 1 + JITTER)
    if new_ar < 1:
        nh = int(scale * target)
        nw = int(nh * new_ar)
    else:
        nw = int(scale * target)
        nh = int(nw / new_ar)
    return max(nw, 1), max(nh, 1)


def _resize(image: Image.Image, boxes: np.ndarray, nw: int, nh: int, resample):
    iw, ih = image.size
    if len(boxes):
        boxes[:, [1, 3]] *= nw / iw
        boxes[:, [2, 4]] *= nh / ih
    return image.resize((nw, nh), resample), boxes


def letterbox(image: Image.Image, boxes: np.ndarray, size: int) -> tuple[Image.Image, np.ndarray]:
    """Aspect-preserving resize into a ``size`` square, centred on gray (no randomness)."""
    iw, ih = image.size
    scale = min(size / iw, size / ih)
    nw, nh = max(int(iw * scale), 1), max(int(ih * scale), 1)
    image, boxes = _resize(image, boxes, nw, nh, Image.BICUBIC)
    dx, dy = (size - nw) // 2, (size - nh) // 2
    canvas = Image.new("RGB", (size, size), GRAY)
    canvas.paste(image, (dx, dy))
    if len(boxes):
        boxes[:, [1, 3]] += dx
        boxes[:, [2, 4]] += dy
    return canvas, _clip_and_filter(boxes, size, size)


def random_resize_paste(
    image: Image.Image, boxes: np.ndarray, size: int, rng: np.random.Generator
) -> tuple[Image.Image, np.ndarray]:
    """The recipe's single-image geometry: jitter, scale, paste on gray, flip with p=0.5."""
    iw, ih = image.size
    nw, nh = _jittered_size(rng, iw, ih, size, rng.uniform(*SCALE))
    image, boxes = _resize(image, boxes, nw, nh, Image.BICUBIC)
    # The offset may be negative (image larger than the canvas): paste crops it.
    dx = int((size - nw) * rng.random())
    dy = int((size - nh) * rng.random())
    canvas = Image.new("RGB", (size, size), GRAY)
    canvas.paste(image, (dx, dy))
    if len(boxes):
        boxes[:, [1, 3]] += dx
        boxes[:, [2, 4]] += dy
    if rng.random() < 0.5:
        canvas, boxes = _hflip(canvas, boxes)
    return canvas, _clip_and_filter(boxes, size, size)


def mosaic(
    images: list[Image.Image], boxes: list[np.ndarray], size: int, rng: np.random.Generator
) -> tuple[Image.Image, np.ndarray]:
    """Four images cut together around a random centre, each jittered, scaled and flipped.

    Image k fills quadrant k (top-left, bottom-left, bottom-right, top-right) of a ``size``
    square split at ``(cx, cy) ~ U(0.3, 0.7) * size``; the part that falls outside its
    quadrant is cut off, and its boxes with it; where it does not reach, the canvas stays gray.
    """
    if len(images) != 4 or len(boxes) != 4:
        raise ValueError(f"mosaic needs 4 images and 4 box arrays but got {len(images)}.")
    cx = int(size * rng.uniform(0.3, 0.7))
    cy = int(size * rng.uniform(0.3, 0.7))
    canvas = Image.new("RGB", (size, size), GRAY)
    out = []
    # Quadrant rectangles (x0, y0, x1, y1) and the corner of each image that sits at the centre.
    quads = [(0, 0, cx, cy), (0, cy, cx, size), (cx, cy, size, size), (cx, 0, size, cy)]
    for k, (image, b) in enumerate(zip(images, boxes, strict=True)):
        b = b.copy()
        iw, ih = image.size
        nw, nh = _jittered_size(rng, iw, ih, size, rng.uniform(0.4, 1.0))
        if rng.random() < 0.5:
            image, b = _hflip(image, b)
        image, b = _resize(image, b, nw, nh, Image.BICUBIC)
        x0, y0, x1, y1 = quads[k]
        # Anchor the image's inner corner at the centre so it covers its quadrant.
        dx = cx - nw if k in (0, 1) else cx
        dy = cy - nh if k in (0, 3) else cy
        quad = Image.new("RGB", (x1 - x0, y1 - y0), GRAY)
        quad.paste(image, (dx - x0, dy - y0))  # paste crops what falls outside the quadrant
        canvas.paste(quad, (x0, y0))
        if len(b):
            b[:, [1, 3]] += dx
            b[:, [2, 4]] += dy
            out.append(_clip_and_filter(b, x1, y1, x0, y0))
    merged = np.concatenate(out) if out else np.zeros((0, 5), np.float32)
    return canvas, merged


_LUMA = np.array([0.213, 0.715, 0.072])  # Rec. 709 weights, as in the CSS colour filters


def hsv_matrix(gains: np.ndarray) -> np.ndarray:
    """3x3 RGB matrix for hue/saturation/value gains ``(rh, rs, rv)`` (1 = unchanged).

    Hue: rotation about the gray axis by ``(rh - 1) * 180`` degrees (the recipe multiplies the
    hue by ``rh``, which shifts a mid-range hue by that much); saturation: blend with luma;
    value: scale. Gray stays gray (up to the value scale).
    """
    rh, rs, rv = (float(g) for g in gains)
    theta = (rh - 1) * np.pi
    c, s = np.cos(theta), np.sin(theta)
    lum = np.tile(_LUMA, (3, 1))
    hue = (
        lum
        + c * (np.eye(3) - lum)
        + s * np.array([[-0.213, -0.715, 0.928], [0.143, 0.140, -0.283], [-0.787, 0.715, 0.072]])
    )
    sat = lum + rs * (np.eye(3) - lum)
    return rv * sat @ hue


def hsv_jitter(
    image: Image.Image, rng: np.random.Generator, gains: tuple[float, float, float] = HSV_GAINS
) -> Image.Image:
    """Random hue/saturation/value gains ``1 + U(-1, 1) * gains``, as one colour matrix.

    The recipe converts to HSV and back with OpenCV (~1-2 ms at 416 px); PIL's HSV
    conversion is several times slower, so the same gains are applied as one RGB matrix
    (:func:`hsv_matrix`), a cost close to the recipe's.
    """
    r = rng.uniform(-1, 1, 3) * np.asarray(gains) + 1
    if not np.any(gains):
        return image
    m = hsv_matrix(r)
    return image.convert("RGB", tuple(np.concatenate([m, np.zeros((3, 1))], axis=1).ravel()))


def to_tensor(image: Image.Image) -> torch.Tensor:
    """uint8 CHW tensor (contiguous) from an RGB PIL image."""
    return torch.from_numpy(np.ascontiguousarray(np.asarray(image).transpose(2, 0, 1)))
