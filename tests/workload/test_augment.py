from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from loadersearch.workload import _augment as aug

SIZE = 96
COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]


def _scene(w: int, h: int, rects: list[tuple[int, int, int, int, int]], background=(0, 0, 0)):
    """A black image with solid rectangles; rect = (class, x1, y1, x2, y2), colour by class."""
    image = Image.new("RGB", (w, h), background)
    for cls, x1, y1, x2, y2 in rects:
        image.paste(COLOURS[cls], (x1, y1, x2, y2))
    return image, np.array(rects, np.float32)


def _assert_boxes_match_colours(image: Image.Image, boxes: np.ndarray, min_px: int = 4):
    """Each box's inside is its class colour; each colour visible in bulk has a box."""
    px = np.asarray(image).astype(int)
    for cls, x1, y1, x2, y2 in boxes:
        assert 0 <= x1 < x2 <= image.width and 0 <= y1 < y2 <= image.height
        if x2 - x1 < min_px or y2 - y1 < min_px:
            continue  # a box of a few pixels is all resampling edge
        # Shrink by a pixel on each side: resampling blurs the edge.
        inner = px[int(np.ceil(y1)) + 1 : int(y2) - 1, int(np.ceil(x1)) + 1 : int(x2) - 1]
        if inner.size == 0:
            continue
        close = np.abs(inner - COLOURS[int(cls)]).max(axis=-1) < 40
        assert close.mean() > 0.9, (cls, x1, y1, x2, y2, close.mean())
    for cls, colour in enumerate(COLOURS):
        visible = (np.abs(px - colour).max(axis=-1) < 40).sum()
        if visible > 4 * min_px * min_px:
            assert cls in boxes[:, 0], f"colour of class {cls} visible ({visible} px) but no box"


def test_random_resize_paste_keeps_boxes_on_their_objects():
    image, boxes = _scene(
        160, 120, [(0, 10, 10, 60, 50), (1, 80, 30, 150, 110), (2, 30, 70, 50, 90)]
    )
    flips = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        out, b = aug.random_resize_paste(image.copy(), boxes.copy(), SIZE, rng)
        assert out.size == (SIZE, SIZE) and out.mode == "RGB"
        _assert_boxes_match_colours(out, b)
        # Flipped iff the red box (left in the source) ends up right of the green one.
        if 0 in b[:, 0] and 1 in b[:, 0]:
            flips += b[b[:, 0] == 0, 1][0] > b[b[:, 0] == 1, 1][0]
    assert 5 < flips < 35  # p=0.5


def test_random_resize_paste_fills_the_rest_with_gray_and_drops_boxes_pushed_out():
    image, boxes = _scene(160, 120, [(0, 0, 0, 4, 4), (1, 60, 40, 100, 80)], background=(0, 0, 0))
    grays = dropped = 0
    for seed in range(40):
        out, b = aug.random_resize_paste(
            image.copy(), boxes.copy(), SIZE, np.random.default_rng(seed)
        )
        px = np.asarray(out)
        grays += (px == 128).all(axis=-1).any()
        dropped += 0 not in b[:, 0]
        assert np.all(b[:, 3] - b[:, 1] > aug.MIN_BOX_PX) and np.all(
            b[:, 4] - b[:, 2] > aug.MIN_BOX_PX
        )
    assert grays > 10 and dropped > 0


def test_horizontal_flip_mirrors_image_and_boxes():
    image, boxes = _scene(100, 50, [(0, 0, 0, 20, 50)])
    out, b = aug._hflip(image, boxes.copy())
    np.testing.assert_allclose(b, [[0, 80, 0, 100, 50]])
    _assert_boxes_match_colours(out, b)
    assert np.asarray(out)[25, 5].tolist() == [0, 0, 0]


def test_letterbox_is_centred_aspect_preserving_and_deterministic():
    image, boxes = _scene(200, 100, [(2, 100, 0, 200, 100)])
    out, b = aug.letterbox(image, boxes.copy(), SIZE)
    np.testing.assert_allclose(b, [[2, 48, 24, 96, 72]])
    _assert_boxes_match_colours(out, b)
    px = np.asarray(out)
    assert px[5, 48].tolist() == [128, 128, 128] and px[90, 48].tolist() == [128, 128, 128]
    again, _ = aug.letterbox(image, boxes.copy(), SIZE)
    assert np.array_equal(px, np.asarray(again))


def test_mosaic_places_four_images_with_their_boxes():
    scenes = [_scene(120, 90, [(k, 20, 20, 100, 70)]) for k in range(4)]
    seen = set()
    for seed in range(20):
        out, b = aug.mosaic(
            [s[0].copy() for s in scenes],
            [s[1].copy() for s in scenes],
            SIZE,
            np.random.default_rng(seed),
        )
        assert out.size == (SIZE, SIZE)
        _assert_boxes_match_colours(out, b)
        seen.update(int(c) for c in b[:, 0])
    assert seen == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="4 images"):
        aug.mosaic([scenes[0][0]], [scenes[0][1]], SIZE, np.random.default_rng(0))


def test_hsv_jitter_changes_colours_reproducibly_and_not_with_zero_gains():
    image = Image.new("RGB", (64, 64), (150, 100, 60))
    image.paste((60, 120, 180), (32, 0, 64, 64))
    a = aug.hsv_jitter(image, np.random.default_rng(1))
    b = aug.hsv_jitter(image, np.random.default_rng(1))
    assert a.mode == "RGB" and a.size == image.size
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(image))
    same = aug.hsv_jitter(image, np.random.default_rng(1), gains=(0, 0, 0))
    assert np.array_equal(np.asarray(same), np.asarray(image))


def test_to_tensor_gives_contiguous_uint8_chw():
    image, _ = _scene(40, 30, [(1, 0, 0, 10, 10)])
    t = aug.to_tensor(image)
    assert t.shape == (3, 30, 40) and t.is_contiguous() and str(t.dtype) == "torch.uint8"
    assert t[:, 5, 5].tolist() == [0, 255, 0]


def test_hsv_matrix_is_identity_at_unit_gains_and_keeps_gray_gray():
    np.testing.assert_allclose(aug.hsv_matrix(np.array([1.0, 1.0, 1.0])), np.eye(3), atol=1e-9)
    m = aug.hsv_matrix(np.array([1.08, 1.6, 0.7]))
    np.testing.assert_allclose(m @ [100, 100, 100], [70, 70, 70], atol=1e-6)
    desaturated = aug.hsv_matrix(np.array([1.0, 0.0, 1.0])) @ [200, 50, 50]
    assert np.ptp(desaturated) < 1e-6
