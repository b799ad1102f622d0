"""Datasets, readers, transforms and loaders.

``load_dataset(name, data_dir, seed=, rows=, normalization=)`` gives in-memory :class:`DataSplits`;
:class:`BatchLoader` batches them by indexing; :class:`BatchAugment` augments whole batches;
:func:`normalize` standardises; :func:`read_image` reads one image file or refuses it.
"""

from .augment import AugmentConfig, BatchAugment, Normalize, normalize
from .dataset import NORMALIZATIONS, DataSplits, ImageDataset, Source, make_splits, stratified_order, stratified_split
from .fetch import download
from .image import read_image
from .loader import BatchLoader, ShardSampler
from .registry import describe_dataset, list_datasets, load_dataset, locate_dataset

__all__ = [
    "NORMALIZATIONS",
    "AugmentConfig",
    "BatchAugment",
    "BatchLoader",
    "ShardSampler",
    "DataSplits",
    "ImageDataset",
    "Normalize",
    "Source",
    "describe_dataset",
    "download",
    "list_datasets",
    "load_dataset",
    "locate_dataset",
    "make_splits",
    "normalize",
    "read_image",
    "stratified_order",
    "stratified_split",
]
