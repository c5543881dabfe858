"""Decoding one image to upright RGB, with errors that name the file; checking an image's
header (the dataset check, before any measurement)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from loadersearch._units import fmt_bytes
from loadersearch.errors import BadSampleError
from loadersearch.workload._datasets._common import log, pil_open, quiet_bomb_warning


class SampleError(BadSampleError):
    """A :class:`BadSampleError` that survives the trip back from a DataLoader worker.

    PyTorch re-raises a worker's exception in the main process by building a new one from the
    worker's traceback text, as ``exc_type(message=text)`` when the class has a ``message``
    attribute (otherwise it gives up and raises a RuntimeError). This class rebuilds ``path``
    and ``reason`` from that text and keeps the text in ``worker_traceback``.
    """

    message = "a sample could not be loaded"  # truthy: tells PyTorch to pass message=

    def __init__(
        self, path: str | None = None, reason: str | None = None, *, message: str | None = None
    ) -> None:
        self.worker_traceback = message
        if message is not None:
            path, reason = self._parse(message)
        super().__init__(str(path), str(reason))

    @classmethod
    def _parse(cls, text: str) -> tuple[str, str]:
        prefix = f"{cls.__module__}.{cls.__qualname__}: "
        where = text.splitlines()[0].removeprefix("Caught SampleError ").rstrip(".")
        for line in reversed(text.splitlines()):
            if line.startswith(prefix):
                path, _, reason = line[len(prefix) :].partition(": ")
                return path, f"{reason} ({where})"
        return "<DataLoader worker>", text.strip().splitlines()[-1]


def decode(path: str, file: Any = None) -> Image.Image:
    """An upright RGB image, or :class:`SampleError` naming the file and the reason.
    ``file``: the file's bytes already read (a file object: the RAM cache), else ``path`` is
    read."""
    try:
        with quiet_bomb_warning(), pil_open(path if file is None else file) as im:
            im.load()
            ImageOps.exif_transpose(im, in_place=True)
            if im.mode in ("I;16", "I;16L", "I;16B", "I;16N"):
                arr = np.asarray(im, dtype=np.uint16) >> 8
                return Image.fromarray(arr.astype(np.uint8)).convert("RGB")
            return im if im.mode == "RGB" else im.convert("RGB")
    except FileNotFoundError as e:
        raise SampleError(path, "image file does not exist") from e
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise SampleError(path, f"cannot decode image: {type(e).__name__}: {e}") from e


def header_problem(path: str) -> str | None:
    """Why the file at ``path`` is not an image PIL can open, or None. Reads the header only
    (a few KB): a truncated image is found when it is decoded, in the measurement."""
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", Image.DecompressionBombWarning)
            with pil_open(path) as im:
                width, height = im.size
    except FileNotFoundError:
        return "image file does not exist"
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        return f"cannot decode image: {type(e).__name__}: {e}"
    for w in said:
        if issubclass(w.category, Image.DecompressionBombWarning):
            # PIL's own warning names no file; what it refuses outright is the error above
            log.warning(
                "%s is %d x %d pixels (%.0f megapixels; PIL warns of a decompression bomb "
                "over %.0f): decoding it takes about %s of memory and is slow; resize it "
                "unless that size is meant", path, width, height, width * height / 1e6,
                Image.MAX_IMAGE_PIXELS / 1e6, fmt_bytes(3 * width * height),
            )  # fmt: skip
        else:  # not ours to judge: shown as it would have been
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return None
