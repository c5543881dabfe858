"""The YOLOv4-tiny training workload: model, loss, datasets and augmentation.

:func:`create_workload` turns a :class:`WorkloadSpec` into what the timed loop needs: the
dataset (with its collate and worker init), the device, and one ``step`` per batch (YOLOv4-tiny
training, nothing for ``loader``, a sleeping stand-in for ``emulated``).
Importing this package does not import torch; :func:`create_workload` does.
"""

from __future__ import annotations

from typing import Any

from loadersearch._lazy import lazy_attribute
from loadersearch.workload._device import check_gpus, resolve_device, resolved_workload, uses_cuda
from loadersearch.workload._emulated import EmulatedAccelerator, EmulatedStorage, VramCapExceeded
from loadersearch.workload._refs import MEASURING_ENV, check_refs, child_environ, ref_of
from loadersearch.workload._spec import (
    FORMATS,
    PIPELINE_PARTS,
    PipelineSpec,
    WorkloadSpec,
    workload_for,
)
from loadersearch.workload._stored_refs import PipelineTrust, admit_stored
from loadersearch.workload._workload import (
    CPU_TRAIN_IMG_SIZE,
    GPU_IMG_SIZE,
    PipelineData,
    Workload,
    check_data,
    create_workload,
    preload_workload,
    prepare_cache,
    resolve_img_size,
)

# Imported on first use: their modules import torch, numpy or optuna (loadersearch._lazy).
_LAZY = {
    "open_dataset": "_datasets",
    "SKIPPED_ENV": "_datasets.skipped",
    "announce": "_datasets.skipped",
    "merge_into": "_datasets.skipped",
    "read_skipped": "_datasets.skipped",
    "make_optimizer": "_step",
    "train_step": "_step",
    "DEFAULT_DATASET_IMAGES": "_synthetic",
    "default_dataset": "_synthetic",
    "make_dataset": "_synthetic",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "CPU_TRAIN_IMG_SIZE",
    "DEFAULT_DATASET_IMAGES",
    "EmulatedAccelerator",
    "EmulatedStorage",
    "FORMATS",
    "GPU_IMG_SIZE",
    "MEASURING_ENV",
    "PIPELINE_PARTS",
    "PipelineData",
    "PipelineSpec",
    "PipelineTrust",
    "SKIPPED_ENV",
    "VramCapExceeded",
    "Workload",
    "WorkloadSpec",
    "admit_stored",
    "announce",
    "check_data",
    "check_gpus",
    "check_refs",
    "child_environ",
    "create_workload",
    "default_dataset",
    "make_dataset",
    "make_optimizer",
    "merge_into",
    "open_dataset",
    "preload_workload",
    "prepare_cache",
    "read_skipped",
    "ref_of",
    "resolve_device",
    "resolve_img_size",
    "resolved_workload",
    "train_step",
    "uses_cuda",
    "workload_for",
]
