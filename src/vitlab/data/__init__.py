"""Datasets, readers, transforms and loaders.

Every dataset is a :class:`DatasetSpec` in one registry (:mod:`vitlab.data.registry`: ``list_datasets``,
``dataset_spec``, ``register_dataset``). ``load_dataset(name, data_dir, seed=, rows=, normalization=)`` gives
:class:`DataSplits`: tensors in memory (digits, MNIST, CIFAR; :class:`BatchLoader` batches them by indexing),
or, for image files (a folder, a manifest, WebDataset shards, a Hugging Face dataset; :func:`read_records`),
splits held in memory (decoded when first used) or streamed (:class:`StreamDataset`: uint8 batches decoded in
``DataLoader`` workers), each image read through a :class:`Preprocess` (timm's eval pipeline exactly).
:class:`DataOptions` are a run's data fields. :class:`DataConfig` is what a model needs from its input (size,
crop, filter, mean/std, channels, classes) and builds it: ``data.eval_transform()(data.load_image(path))``.
:class:`BatchAugment` augments whole batches; :func:`normalize`
standardises; :func:`decode_image` / :func:`read_image` read one image file or refuse it (:func:`image_channels`,
:func:`convert_image`, :func:`image_tensor` the steps between, shared with the explorer).
"""

from .augment import AugmentConfig, BatchAugment
from .config import DataConfig
from .dataset import NORMALIZATIONS, DataSplits, ImageDataset, Source, make_splits
from .fetch import download
from .image import convert_image, decode_image, image_channels, image_tensor, read_image
from .load import load_caption_dataset, load_dataset, load_dense_dataset
from .loader import BatchLoader, ShardSampler
from .options import DataOptions
from .preprocess import Preprocess, normalize
from .records import Records, split_records
from .registry import (
    DatasetSpec,
    dataset_spec,
    describe_dataset,
    list_datasets,
    locate_dataset,
    read_records,
    register_dataset,
)
from .split import stratified_order, stratified_split
from .stream import StreamDataset

__all__ = [
    "NORMALIZATIONS",
    "AugmentConfig",
    "BatchAugment",
    "BatchLoader",
    "ShardSampler",
    "DataConfig",
    "DataOptions",
    "DataSplits",
    "DatasetSpec",
    "ImageDataset",
    "Preprocess",
    "Records",
    "StreamDataset",
    "Source",
    "convert_image",
    "dataset_spec",
    "decode_image",
    "describe_dataset",
    "download",
    "image_channels",
    "image_tensor",
    "list_datasets",
    "load_caption_dataset",
    "load_dataset",
    "load_dense_dataset",
    "locate_dataset",
    "make_splits",
    "normalize",
    "read_image",
    "read_records",
    "register_dataset",
    "split_records",
    "stratified_order",
    "stratified_split",
]
