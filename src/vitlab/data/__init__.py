"""Datasets, readers, transforms and loaders.

``load_dataset(name, data_dir, seed=, rows=)`` gives in-memory :class:`DataSplits`; :class:`BatchLoader`
batches them by indexing; :class:`BatchAugment` augments whole batches; :func:`normalize` standardises.
"""
from .augment import AugmentConfig, BatchAugment, Normalize, normalize
from .dataset import DataSplits, ImageDataset, stratified_order, stratified_split
from .digits import load_digits_splits
from .fetch import download
from .loader import BatchLoader
from .registry import describe_dataset, list_datasets, load_dataset

__all__ = ["AugmentConfig", "BatchAugment", "BatchLoader", "DataSplits", "ImageDataset", "Normalize",
           "describe_dataset", "download", "list_datasets", "load_dataset", "load_digits_splits", "normalize",
           "stratified_order", "stratified_split"]
