"""Datasets, readers, transforms and loaders."""
from .dataset import DataSplits, ImageDataset, stratified_split
from .digits import load_digits_splits

__all__ = ["DataSplits", "ImageDataset", "stratified_split", "load_digits_splits"]
