from __future__ import annotations

from click.testing import CliRunner

from loadersearch.cli import cli


def test_make_dataset_writes_the_dataset_and_prints_a_summary(tmp_path):
    out = tmp_path / "d"
    args = ["make-dataset", str(out), "--images", "3", "--format", "coco", "--seed", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Wrote 3 images (coco)" in result.output
    assert "KB mean file size" in result.output and "boxes/image" in result.output
    assert len(list((out / "images").glob("*.jpg"))) == 3
    assert (out / "annotations" / "instances_train.json").is_file()


def test_make_dataset_refuses_a_non_empty_directory_unless_forced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["make-dataset", str(tmp_path), "--images", "2"])
    assert result.exit_code == 2
    assert "is not empty" in result.output and "--force" in result.output
    assert not (tmp_path / "images").exists()
    result = CliRunner().invoke(cli, ["make-dataset", str(tmp_path), "-n", "2", "--force"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert len(list((tmp_path / "labels").glob("*.txt"))) == 2


def test_make_dataset_help_explains_the_options():
    result = CliRunner().invoke(cli, ["make-dataset", "--help"])
    assert result.exit_code == 0
    for word in ("--images", "--format", "--seed", "--classes", "--force", "VOC"):
        assert word in result.output


def test_make_dataset_rejects_an_unknown_format(tmp_path):
    result = CliRunner().invoke(cli, ["make-dataset", str(tmp_path / "x"), "--format", "kitti"])
    assert result.exit_code == 2 and "kitti" in result.output
