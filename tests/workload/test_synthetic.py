from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from loadersearch.workload import _synthetic as synthetic
from loadersearch.workload._synthetic import make_dataset, render_image


@pytest.mark.slow
def test_generated_images_resemble_voc_in_size_boxes_and_orientation(tmp_path):
    stats = make_dataset(tmp_path, images=64, seed=0)
    assert stats["images"] == 64
    assert 70 <= stats["mean_kb"] <= 120, stats
    assert 1.9 <= stats["boxes_per_image"] <= 2.9, stats
    assert stats["landscape"] > stats["portrait"] > 0
    sizes = {Image.open(p).size for p in (tmp_path / "images").glob("*.jpg")}
    assert sizes == {(500, 375), (375, 500)}
    files = sorted((tmp_path / "images").glob("*.jpg"))
    assert len(files) == 64
    assert sum(f.stat().st_size for f in files) == stats["total_bytes"]


def test_generated_images_have_texture_not_smooth_gradients():
    data, _, (w, h) = render_image(0, 3)
    px = np.asarray(Image.open(__import__("io").BytesIO(data)).convert("L"), dtype=float)
    # Neighbouring pixels differ by several grey levels on average, as in photos.
    assert np.abs(np.diff(px, axis=1)).mean() > 4


def test_same_seed_gives_the_same_bytes_and_another_seed_does_not(tmp_path):
    make_dataset(tmp_path / "a", images=3, seed=5, fmt="voc")
    make_dataset(tmp_path / "b", images=3, seed=5, fmt="voc")
    make_dataset(tmp_path / "c", images=3, seed=6, fmt="voc")
    for rel in ("JPEGImages/000002.jpg", "Annotations/000002.xml"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
        assert (tmp_path / "a" / rel).read_bytes() != (tmp_path / "c" / rel).read_bytes()


@pytest.mark.parametrize(
    "fmt,files",
    [
        ("yolo", ["images/000000.jpg", "labels/000000.txt", "classes.txt"]),
        ("voc", ["JPEGImages/000000.jpg", "Annotations/000000.xml", "ImageSets/Main/train.txt"]),
        ("coco", ["images/000000.jpg", "annotations/instances_train.json"]),
    ],
)
def test_each_format_writes_its_layout(tmp_path, fmt, files):
    make_dataset(tmp_path, images=2, fmt=fmt, num_classes=3)
    for f in files:
        assert (tmp_path / f).is_file(), f


def test_bad_arguments_are_refused_with_the_value(tmp_path):
    with pytest.raises(ValueError, match="'tfrecord'"):
        make_dataset(tmp_path, images=2, fmt="tfrecord")
    with pytest.raises(ValueError, match="images must be at least 1 but got 0"):
        make_dataset(tmp_path, images=0)


def test_more_than_twenty_classes_get_generated_names():
    assert synthetic.class_names(3) == ["aeroplane", "bicycle", "bird"]
    assert synthetic.class_names(25)[24] == "class024"


@pytest.fixture
def small_default(monkeypatch, tmp_path):
    monkeypatch.setattr(synthetic, "DEFAULT_DATASET_IMAGES", 3)
    return tmp_path / "data" / "voc-synth"


def test_default_dataset_is_generated_once_with_a_marker(small_default):
    path = Path(synthetic.default_dataset(small_default))
    assert path == small_default and (path / synthetic.MARKER).is_file()
    assert len(list((path / "images").glob("*.jpg"))) == 3
    marker_time = (path / synthetic.MARKER).stat().st_mtime_ns
    assert synthetic.default_dataset(small_default) == str(path)
    assert (path / synthetic.MARKER).stat().st_mtime_ns == marker_time  # not regenerated
    assert not list(path.parent.glob("*.tmp-*"))  # no temporary leftovers


def test_default_dataset_redoes_an_interrupted_generation(small_default):
    (small_default / "images").mkdir(parents=True)
    (small_default / "images" / "000000.jpg").write_bytes(b"half written")
    synthetic.default_dataset(small_default)
    assert (small_default / synthetic.MARKER).is_file()
    assert Image.open(small_default / "images" / "000000.jpg").size in {(500, 375), (375, 500)}


def test_default_dataset_is_safe_when_two_callers_race(small_default):
    results, errors = [], []

    def call():
        try:
            results.append(synthetic.default_dataset(small_default))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [str(small_default)] * 2
    assert len(list((small_default / "images").glob("*.jpg"))) == 3
    assert not list(small_default.parent.glob("*.tmp-*"))
