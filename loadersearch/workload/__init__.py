"""The YOLOv4-tiny training workload: model, loss, datasets and augmentation."""
