from __future__ import annotations

import io
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from loadersearch.errors import BadSampleError, DatasetError, LoaderSearchError
from loadersearch.workload import _datasets as datasets
from loadersearch.workload._datasets import collate, detect_format, open_dataset

SIZE = 64  # small network input keeps the tests fast


def _copy_yolo(src: str, dst: Path, n: int = 6) -> Path:
    """The first n images of a YOLO dataset, copied so that a test may damage them."""
    for sub, ext in (("images", ".jpg"), ("labels", ".txt")):
        (dst / sub).mkdir(parents=True)
        for k in range(n):
            shutil.copy(Path(src) / sub / f"{k:06d}{ext}", dst / sub / f"{k:06d}{ext}")
    shutil.copy(Path(src) / "classes.txt", dst / "classes.txt")
    return dst


def _loader(ds, workers: int, batch_size: int = 2):
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, num_workers=workers, collate_fn=collate
    )


# --------------------------------------------------------------------------- readers


@pytest.mark.parametrize(
    "fixture,fmt", [("tiny_dataset", "yolo"), ("tiny_voc", "voc"), ("tiny_coco", "coco")]
)
def test_each_format_is_detected_and_read_with_the_same_boxes(request, tiny_dataset, fixture, fmt):
    root = request.getfixturevalue(fixture)
    assert detect_format(root) == fmt
    ds = open_dataset(root, img_size=SIZE)
    reference = open_dataset(tiny_dataset, img_size=SIZE)
    assert ds.fmt == fmt and len(ds) == len(reference) == 16
    assert ds.num_classes == 20 and ds.class_names[0] == "aeroplane"
    for i in range(len(ds)):
        np.testing.assert_allclose(ds.labels(i), reference.labels(i), atol=1e-5)
    image, boxes = ds[0]
    assert image.shape == (3, SIZE, SIZE) and image.dtype == torch.uint8
    assert boxes.dtype == torch.float32 and boxes.shape[1] == 5


def test_metadata_is_kept_in_numpy_arrays_not_python_lists(tiny_dataset):
    ds = open_dataset(tiny_dataset, img_size=SIZE)
    arrays = [v for v in vars(ds).values() if isinstance(v, np.ndarray)]
    assert len(arrays) >= 3
    assert not any(isinstance(v, (list, dict)) and len(v) >= len(ds) for v in vars(ds).values())


def test_format_override_reads_the_named_layout_and_rejects_a_wrong_one(tiny_voc):
    assert open_dataset(tiny_voc, "voc", img_size=SIZE).fmt == "voc"
    with pytest.raises(DatasetError, match="YOLO"):
        open_dataset(tiny_voc, "yolo", img_size=SIZE)
    with pytest.raises(DatasetError, match="choose one of yolo, voc, coco"):
        open_dataset(tiny_voc, "kitti", img_size=SIZE)


def test_missing_directory_is_a_dataset_error_naming_it(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError, match=f"{missing} does not exist"):
        open_dataset(missing, img_size=SIZE)
    with pytest.raises(DatasetError, match="does not exist"):
        open_dataset(missing, "yolo", img_size=SIZE)


def test_unknown_layout_names_the_directory_and_what_was_expected(tmp_path):
    (tmp_path / "pictures").mkdir()
    with pytest.raises(DatasetError) as e:
        detect_format(tmp_path)
    assert str(tmp_path) in str(e.value)
    assert "images/ + labels/" in str(e.value) and "JPEGImages/" in str(e.value)
    assert "pictures" in str(e.value)


def test_yolo_split_folders_are_read_and_an_unknown_split_is_refused(tiny_dataset, tmp_path):
    flat = _copy_yolo(tiny_dataset, tmp_path / "flat", n=4)
    root = tmp_path / "split"
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True)
        shutil.move(flat / sub, root / sub / "train")
    ds = open_dataset(root, img_size=SIZE)  # no split given: train
    assert len(ds) == 4 and ds.labels(0).shape[1] == 5 and len(ds.labels(0)) > 0
    assert len(open_dataset(root, img_size=SIZE, split="train")) == 4
    with pytest.raises(DatasetError, match="No split 'val'"):
        open_dataset(root, img_size=SIZE, split="val")


def test_voc_split_listing_is_used_when_named(tiny_voc):
    assert len(open_dataset(tiny_voc, img_size=SIZE, split="train")) == 16
    with pytest.raises(DatasetError, match="val.txt does not exist"):
        open_dataset(tiny_voc, img_size=SIZE, split="val")


def test_coco_category_ids_are_mapped_to_contiguous_ids(tmp_path):
    (tmp_path / "images").mkdir()
    Image.new("RGB", (100, 50), (0, 0, 0)).save(tmp_path / "images" / "a.jpg")
    Image.new("RGB", (100, 50), (0, 0, 0)).save(tmp_path / "images" / "b.jpg")
    doc = {
        "images": [
            {"id": 10, "file_name": "a.jpg", "width": 100, "height": 50},
            {"id": 11, "file_name": "b.jpg", "width": 100, "height": 50},
        ],
        "annotations": [
            {"id": 1, "image_id": 10, "category_id": 90, "bbox": [0, 0, 50, 25]},
            {"id": 2, "image_id": 10, "category_id": 3, "bbox": [50, 25, 50, 25]},
            {"id": 3, "image_id": 10, "category_id": 3, "bbox": [0, 0, 9, 9], "iscrowd": 1},
        ],
        "categories": [{"id": 3, "name": "car"}, {"id": 90, "name": "toothbrush"}],
    }
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    ds = open_dataset(tmp_path, img_size=SIZE, augment=False)
    assert ds.fmt == "coco" and ds.num_classes == 2 and ds.class_names == ("car", "toothbrush")
    np.testing.assert_allclose(
        ds.labels(0), [[1, 0.25, 0.25, 0.5, 0.5], [0, 0.75, 0.75, 0.5, 0.5]], atol=1e-6
    )
    assert len(ds.labels(1)) == 0  # no annotations: a background image


# --------------------------------------------------------------------------- bad data


def test_truncated_jpeg_raises_bad_sample_error_naming_the_file(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    bad = root / "images" / "000002.jpg"
    bad.write_bytes(bad.read_bytes()[:4000])
    ds = open_dataset(root, img_size=SIZE)  # labels are fine: opening works
    with pytest.raises(BadSampleError) as e:
        ds[2]
    assert e.value.path == str(bad) and "cannot decode image" in e.value.reason
    assert "truncated" in str(e.value)
    ds[1]  # the others still load


def test_garbage_file_with_jpg_name_raises_bad_sample_error(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    bad = root / "images" / "000003.jpg"
    bad.write_bytes(b"<html>not an image</html>" * 10)
    with pytest.raises(BadSampleError, match="000003.jpg: cannot decode image"):
        open_dataset(root, img_size=SIZE)[3]


def test_bad_image_error_reaches_the_main_process_from_a_worker_with_file_and_reason(
    tiny_dataset, tmp_path
):
    root = _copy_yolo(tiny_dataset, tmp_path)
    bad = root / "images" / "000004.jpg"
    bad.write_bytes(bad.read_bytes()[:3000])
    ds = open_dataset(root, img_size=SIZE)
    it, err = iter(_loader(ds, workers=2)), None
    try:
        for _ in it:
            pass
    except Exception as e:  # keep no traceback (it holds the loader's workers) past this test
        err = e.with_traceback(None)
    finally:
        it._shutdown_workers()
    assert isinstance(err, BadSampleError) and isinstance(err, LoaderSearchError)
    assert err.path == str(bad)
    assert err.reason.startswith("cannot decode image") and "worker" in err.reason
    assert "Traceback" not in str(err)
    assert "Traceback" in err.worker_traceback  # kept for --debug


def test_bad_sample_error_survives_pickling(tmp_path):
    import pickle

    err = datasets.SampleError(str(tmp_path / "x.jpg"), "cannot decode image: boom")
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.reason) == (err.path, err.reason)


def test_skip_bad_samples_substitutes_the_next_image_and_warns(tiny_dataset, tmp_path, caplog):
    root = _copy_yolo(tiny_dataset, tmp_path)
    (root / "images" / "000002.jpg").write_bytes(b"garbage")
    ds = open_dataset(root, img_size=SIZE, augment=False, skip_bad_samples=True)
    with caplog.at_level(logging.WARNING, logger="loadersearch.workload._datasets"):
        image, boxes = ds[2]
    expected_image, expected_boxes = ds[3]
    assert torch.equal(image, expected_image) and torch.equal(boxes, expected_boxes)
    assert "000002.jpg" in caplog.text
    batches = list(_loader(ds, workers=2, batch_size=3))
    assert sum(len(b[0]) for b in batches) == len(ds)


def test_malformed_label_line_is_a_dataset_error_naming_file_and_line(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    label = root / "labels" / "000001.txt"
    label.write_text("0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2\n")
    with pytest.raises(DatasetError) as e:
        open_dataset(root, img_size=SIZE)
    msg = str(e.value)
    assert f"{label}:2" in msg and "expected 5 numbers" in msg and "--skip-bad-samples" in msg
    label.write_text("0 0.5 0.5 0.2 zero\n")
    with pytest.raises(DatasetError, match=r"000001.txt:1: not a number"):
        open_dataset(root, img_size=SIZE)


@pytest.mark.parametrize(
    "line,reason",
    [
        ("0 1.5 0.5 0.2 0.2", "out of range"),
        ("0 250 120 40 30", "pixel coordinates"),
        ("25 0.5 0.5 0.2 0.2", "class 25 out of range"),
        ("-1 0.5 0.5 0.2 0.2", "class -1 out of range"),
        ("0 0.5 0.5 0.0 0.2", "zero-size box"),
    ],
)
def test_out_of_range_box_is_a_dataset_error_naming_the_file(tiny_dataset, tmp_path, line, reason):
    root = _copy_yolo(tiny_dataset, tmp_path)
    (root / "labels" / "000005.txt").write_text(line + "\n")
    with pytest.raises(DatasetError, match=f"000005.txt:1: .*{reason}"):
        open_dataset(root, img_size=SIZE)


def test_skip_bad_samples_leaves_bad_labels_out_and_counts_them(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    (root / "labels" / "000001.txt").write_text("0 0.5 0.5\n")
    (root / "labels" / "000004.txt").write_text("3 1.5 0.5 0.1 0.1\n")
    ds = open_dataset(root, img_size=SIZE, skip_bad_samples=True)
    assert len(ds) == 4 and ds.skipped == 2
    assert "000001.txt:1" in ds.skipped_reasons[0] and "000004.txt:1" in ds.skipped_reasons[1]
    assert all(b"000001" not in p and b"000004" not in p for p in ds._paths)


def test_image_without_label_file_is_a_background_image(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    (root / "labels" / "000000.txt").unlink()
    ds = open_dataset(root, img_size=SIZE)
    assert len(ds) == 6 and len(ds.labels(0)) == 0
    image, boxes = ds[0]
    assert image.shape == (3, SIZE, SIZE) and boxes.shape == (0, 5)


def test_voc_box_outside_the_image_names_the_annotation_file(tiny_voc, tmp_path):
    root = tmp_path / "voc"
    shutil.copytree(tiny_voc, root)
    xml = root / "Annotations" / "000003.xml"
    text = xml.read_text()
    start = text.index("<xmax>") + len("<xmax>")
    xml.write_text(text[:start] + "9999" + text[text.index("</xmax>") :])
    with pytest.raises(DatasetError, match=r"000003.xml: object 1 .* outside the"):
        open_dataset(root, img_size=SIZE)
    xml.write_text("<annotation><size>")
    with pytest.raises(DatasetError, match="000003.xml: cannot read annotation"):
        open_dataset(root, img_size=SIZE)
    assert open_dataset(root, img_size=SIZE, skip_bad_samples=True).skipped == 1


def test_coco_bbox_outside_the_image_names_the_json_and_the_annotation(tiny_coco, tmp_path):
    root = tmp_path / "coco"
    shutil.copytree(tiny_coco, root)
    path = root / "annotations" / "instances_train.json"
    doc = json.loads(path.read_text())
    doc["annotations"][0]["bbox"] = [400.0, 10.0, 300.0, 20.0]
    path.write_text(json.dumps(doc))
    with pytest.raises(DatasetError, match=r"instances_train.json: image id 1 .* annotation 1"):
        open_dataset(root, img_size=SIZE)
    assert open_dataset(root, img_size=SIZE, skip_bad_samples=True).skipped == 1


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda d: d.update(images="hello"), "must be lists"),
        (lambda d: d.update(annotations={"a": 1}), "must be lists"),
        (lambda d: d.update(images=[1, 2]), "must be an object"),
        (lambda d: (d.update(categories=[]), d["annotations"][0].pop("category_id")),
         "category_id"),
    ],
)
def test_a_coco_document_of_the_wrong_shape_is_named(tiny_coco, tmp_path, change, match):
    """A red team's finds (stop 50): each was a traceback (TypeError, AttributeError,
    KeyError), now the file and what is wrong with it."""
    root = tmp_path / "coco"
    shutil.copytree(tiny_coco, root)
    path = root / "annotations" / "instances_train.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    bad = rf"instances_train.json: not a COCO annotation file.*{match}"
    with pytest.raises(DatasetError, match=bad):
        open_dataset(root, img_size=SIZE)


def test_a_coco_image_without_a_file_name_is_a_bad_sample(tiny_coco, tmp_path):
    root = tmp_path / "coco"
    shutil.copytree(tiny_coco, root)
    path = root / "annotations" / "instances_train.json"
    doc = json.loads(path.read_text())
    del doc["images"][0]["file_name"]  # the first: the one that used to find the images
    path.write_text(json.dumps(doc))
    with pytest.raises(DatasetError, match=r"image id 1 .*file_name"):
        open_dataset(root, img_size=SIZE)
    assert open_dataset(root, img_size=SIZE, skip_bad_samples=True).skipped == 1


def test_coco_asked_of_a_yolo_dataset_says_what_it_expected(tiny_dataset):
    with pytest.raises(DatasetError, match="No COCO annotations in .*--data-format yolo or voc"):
        open_dataset(tiny_dataset, img_size=SIZE, fmt="coco")


# --------------------------------------------------------------------------- image modes


def _single_image_dataset(tmp_path: Path, image: Image.Image, name: str, label: str, **save):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    image.save(tmp_path / "images" / name, **save)
    (tmp_path / "labels" / (Path(name).stem + ".txt")).write_text(label)
    return open_dataset(tmp_path, img_size=SIZE, augment=False)


@pytest.mark.parametrize(
    "mode,colour,name",
    [
        ("L", 200, "gray.png"),
        ("RGBA", (10, 200, 30, 255), "rgba.png"),
        ("P", None, "palette.png"),
        ("CMYK", None, "cmyk.jpg"),
    ],
)
def test_non_rgb_images_load_as_three_channel_uint8(tmp_path, mode, colour, name):
    rgb = (220, 30, 40)
    if mode == "CMYK":
        image = Image.new("RGB", (80, 40), rgb).convert("CMYK")
    elif mode == "P":
        image = Image.new("P", (80, 40), 1)
        image.putpalette([0, 0, 0, *rgb])
    else:
        image = Image.new(mode, (80, 40), colour)
    ds = _single_image_dataset(tmp_path, image, name, "0 0.5 0.5 0.5 0.5\n")
    out, _ = ds[0]
    assert out.shape == (3, SIZE, SIZE) and out.dtype == torch.uint8
    centre = out[:, SIZE // 2, SIZE // 2].tolist()
    if mode == "L":
        assert centre == [200, 200, 200]
    elif mode == "RGBA":
        assert centre == [10, 200, 30]
    else:
        assert np.allclose(centre, rgb, atol=12), centre


def test_exif_rotated_jpeg_is_turned_upright_and_labels_follow_the_upright_image(tmp_path):
    # Stored landscape: left half red, right half blue. EXIF orientation 6 means "rotate 90
    # degrees clockwise to display": upright it is portrait with red on top, blue below.
    stored = Image.new("RGB", (120, 60), (0, 0, 255))
    stored.paste((255, 0, 0), (0, 0, 60, 60))
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    stored.save(buf, "JPEG", quality=95, exif=exif)
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    (tmp_path / "images" / "rot.jpg").write_bytes(buf.getvalue())
    # The label marks the red half of the upright image: the top half.
    (tmp_path / "labels" / "rot.txt").write_text("0 0.5 0.25 1.0 0.5\n")
    image, boxes = open_dataset(tmp_path, img_size=SIZE, augment=False)[0]
    # Upright 60x120 letterboxed into 64: 32 wide, 64 tall, centred.
    top, bottom = image[:, 8, SIZE // 2].tolist(), image[:, SIZE - 8, SIZE // 2].tolist()
    assert top[0] > 200 and top[2] < 60, top
    assert bottom[2] > 200 and bottom[0] < 60, bottom
    assert image[:, SIZE // 2, 2].tolist() == [128, 128, 128]  # gray bars left and right
    np.testing.assert_allclose(boxes.tolist(), [[0, 0.5, 0.25, 0.5, 0.5]], atol=0.02)


# --------------------------------------------------------------------------- determinism, collate


def test_same_seed_gives_the_same_samples_and_another_seed_does_not(tiny_dataset):
    a = open_dataset(tiny_dataset, img_size=SIZE, seed=3, mosaic=True)
    b = open_dataset(tiny_dataset, img_size=SIZE, seed=3, mosaic=True)
    c = open_dataset(tiny_dataset, img_size=SIZE, seed=4, mosaic=True)
    for i in (0, 5, 9):
        assert torch.equal(a[i][0], b[i][0]) and torch.equal(a[i][1], b[i][1])
    assert any(not torch.equal(a[i][0], c[i][0]) for i in (0, 5, 9))
    a.set_epoch(1)
    assert any(not torch.equal(a[i][0], b[i][0]) for i in (0, 5, 9))


def test_samples_are_the_same_with_zero_or_two_workers(tiny_dataset):
    ds = open_dataset(tiny_dataset, img_size=SIZE, seed=1)
    serial = list(_loader(ds, workers=0, batch_size=4))
    parallel = list(
        torch.utils.data.DataLoader(
            ds,
            batch_size=4,
            num_workers=2,
            collate_fn=collate,
            worker_init_fn=datasets.worker_init_fn,
        )
    )
    assert len(serial) == len(parallel) == 4
    for (xa, ta), (xb, tb) in zip(serial, parallel, strict=True):
        assert torch.equal(xa, xb) and torch.equal(ta, tb)


def test_collate_stacks_images_and_prefixes_targets_with_the_image_index():
    images = [torch.full((3, 32, 32), k, dtype=torch.uint8) for k in range(3)]
    boxes = [
        torch.tensor([[1, 0.5, 0.5, 0.2, 0.2], [2, 0.1, 0.1, 0.1, 0.1]]),
        torch.zeros((0, 5)),
        torch.tensor([[4, 0.3, 0.3, 0.3, 0.3]]),
    ]
    x, t = collate(list(zip(images, boxes, strict=True)))
    assert x.shape == (3, 3, 32, 32) and x.dtype == torch.uint8 and x[2, 0, 0, 0] == 2
    assert t.shape == (3, 6) and t.dtype == torch.float32
    assert t[:, 0].tolist() == [0, 0, 2] and t[:, 1].tolist() == [1, 2, 4]
    x, t = collate([(images[0], boxes[1])])
    assert t.shape == (0, 6)


def test_worker_init_fn_gives_each_worker_its_own_reproducible_numpy_stream():
    class Draws(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.random.randint(0, 2**31)

    def run():
        loader = torch.utils.data.DataLoader(
            Draws(),
            batch_size=1,
            num_workers=2,
            worker_init_fn=datasets.worker_init_fn,
            generator=torch.Generator().manual_seed(5),
        )
        return [int(x) for x in loader]

    first = run()
    assert first == run()
    assert first[0] != first[1]  # samples 0 and 1 come from different workers


# ---------------------------------------------------------------- the check before a run


def test_the_check_before_a_run_opens_every_image_header_and_names_the_bad_one(
    tiny_dataset, tmp_path, caplog
):
    root = _copy_yolo(tiny_dataset, tmp_path)
    assert datasets.check_dataset(root).images == 6
    bad = root / "images" / "000003.jpg"
    bad.write_bytes(b"<html>not an image</html>")
    with pytest.raises(DatasetError, match=r"000003.jpg: cannot decode image.*--skip-bad-samples"):
        datasets.check_dataset(root)
    check = datasets.check_dataset(root, skip_bad_samples=True)
    assert (check.images, check.undecodable, check.left_out) == (6, 1, 0)
    assert "1 not decodable" in check.describe()
    # each file is named once, in a warning of its own, and recorded
    [named] = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert "000003.jpg: cannot decode image" in named and "000003.jpg" in check.reasons[0]


def test_the_check_counts_what_skip_bad_samples_leaves_out(tiny_dataset, tmp_path):
    root = _copy_yolo(tiny_dataset, tmp_path)
    (root / "labels" / "000001.txt").write_text("0 0.5 0.5\n")
    assert datasets.check_dataset(root, skip_bad_samples=True).to_dict()["left_out"] == 1
    assert datasets.check_dataset(_copy_yolo(tiny_dataset, tmp_path / "b")).describe() is None


def test_the_check_does_not_import_torch(tiny_dataset):
    import subprocess
    import sys

    code = (
        "import sys; from loadersearch.workload import check_data; "
        "from loadersearch import WorkloadSpec; "
        f"check_data(WorkloadSpec(data={tiny_dataset!r})); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_study_keeps_each_file_skipped_when_decoding_once_and_the_first_hundred(tmp_path):
    from loadersearch.workload._datasets import skipped

    good = tmp_path / "a.jpg"
    Image.new("RGB", (64, 48)).save(good)
    [entry] = skipped.announce([(str(good), "truncated")])  # its header is fine
    assert skipped.announce([(str(tmp_path / "gone.jpg"), "missing")]) == []  # the check's
    record = skipped.merge_into({"undecodable": 1}, [entry])
    assert record == {"undecodable": 1, "failed_decoding": 1, "failed_decoding_files": [entry]}
    assert skipped.merge_into(record, [entry]) is None  # met again by the next trial
    many = [f"/d/{k}.jpg: truncated" for k in range(150)]
    record = skipped.merge_into(record, many)
    assert len(record["failed_decoding_files"]) == skipped.RECORDED_NAMES
    assert record["failed_decoding"] == 151
    assert skipped.merge_into(record, many[120:]) is None  # not named, but counted already


def test_an_image_over_pils_pixel_limit_is_named_with_its_size_in_one_warning(
    tiny_dataset, tmp_path, caplog
):
    import struct
    import warnings

    root = _copy_yolo(tiny_dataset, tmp_path)
    # A 16x16 JPEG whose header says 12000 x 12000 (144 megapixels, between PIL's warning
    # and its refusal): the check reads headers only, so it needs no 400 MiB image.
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (90, 120, 150)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", 12000, 12000)
    big = root / "images" / "000004.jpg"
    big.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as raw:
        warnings.simplefilter("always")
        check = datasets.check_dataset(root)
    assert check.images == 6  # a warning, not a refusal
    assert not [w for w in raw if issubclass(w.category, Image.DecompressionBombWarning)]
    [named] = [r.getMessage() for r in caplog.records if "12000 x 12000" in r.getMessage()]
    assert str(big) in named and "144 megapixels" in named and "412.0 MiB" in named


def test_a_corrupt_image_is_a_named_bad_sample_after_ultralytics_replaced_image_open(
    tmp_path,
) -> None:
    # Importing Ultralytics swaps PIL.Image.open, process-wide, for a wrapper that meets an
    # unidentified file by installing a HEIF plugin (an ImportError offline); loadersearch's
    # own decoder still says which file is bad and why.
    import PIL.Image

    os.environ.setdefault("YOLO_OFFLINE", "1")  # no DNS probe at import
    pytest.importorskip("ultralytics.utils.patches")
    from loadersearch.errors import BadSampleError
    from loadersearch.workload._datasets.decode import decode, header_problem

    assert PIL.Image.open.__module__ == "ultralytics.utils.patches"
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg at all")
    with pytest.raises(BadSampleError, match="bad.jpg.*cannot decode image"):
        decode(str(bad))
    assert "cannot decode image" in header_problem(str(bad))
