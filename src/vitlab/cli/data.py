"""``vitlab data``: list datasets, describe one's splits, download official files."""

from __future__ import annotations

import argparse
import sys

from ..data import NORMALIZATIONS, download
from ..data.fetch import DEADLINE
from ..data.registry import dataset_specs, photo_sources, read_records, where_read
from ..data.shard_writer import write_dataset_shards
from ..errors import ConfigError
from ..settings import picked
from ..tasks.classify.info import DEFAULT_PHOTO_SIZE, dataset_info
from . import add_data_options, data_options, parse_overrides
from .outputs import Output, add_output


def run_list(args: argparse.Namespace) -> int:
    rows = [("name", "target", "reads from", "held in", "what")]
    rows += [(s.name, s.target, where_read(s), s.storage, s.description) for s in dataset_specs()]
    widths = [max(len(row[k]) for row in rows) for k in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[4])
    return 0


def run_info(args: argparse.Namespace) -> int:
    options = {k: v for k, v in parse_overrides(args.set).items() if k.startswith("data.")}
    unknown = sorted(set(parse_overrides(args.set)) - set(options))
    if unknown:
        raise ConfigError(f"vitlab data info --set takes data.FIELD=VALUE, got {unknown}: e.g. --set data.crop_pct=0.9")
    data = {k.removeprefix("data."): v for k, v in options.items()} | data_options(args)
    name = args.dataset or args.name
    if name is None or (args.dataset and args.name and args.dataset != args.name):
        raise ConfigError("vitlab data info takes one dataset: --dataset NAME (see `vitlab data list`)")
    indexed = lambda n: print(f"indexed {n:,} image files", file=sys.stderr)  # noqa: E731
    options = picked(args, "seed", "rows", "normalization", "model")
    print(dataset_info(name, args.data_dir, data=data, progress=indexed, **options))
    return 0


def run_download(args: argparse.Namespace) -> int:
    for path in download(args.name, args.data_dir, mirror=args.mirror, deadline=args.deadline):
        print(f"ok  {path}")
    return 0


def run_shard(args: argparse.Namespace) -> int:
    splits = read_records(args.dataset, args.data_dir)
    manifest = write_dataset_shards(
        splits,
        args.out,
        max_count=args.max_count,
        max_size=args.max_size,
        max_side=args.max_side,
        with_json=args.json,
        workers=args.workers,
        overwrite=args.overwrite,
    )
    last = len(manifest["splits"]["train"]) - 1 if "train" in manifest["splits"] else 0
    print(f"read them with: --dataset wds --data-dir '{args.out}/train-{{000000..{last:06d}}}.tar'")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list, describe and download datasets")
    data_sub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    q = data_sub.add_parser(
        "list", help="every dataset of every target: where it reads from, memory or stream, what it is"
    )
    q.set_defaults(func=run_list)
    q = data_sub.add_parser("info", help="where a dataset was found, its splits, image shape, classes and statistics")
    q.add_argument("--dataset", help="dataset name (see `vitlab data list`)")
    q.add_argument("name", nargs="?", help=argparse.SUPPRESS)
    q.add_argument(
        "--data-dir",
        default=None,
        help="folder with the dataset's files (default: search "
        "$VITLAB_DATA, ~/.cache/vitlab/data, /usr/share/datasets)",
    )
    q.add_argument("--seed", type=int, default=0, help="split seed (validation is a stratified random part)")
    q.add_argument("--rows", type=int, default=None, help="keep only this many training images")
    q.add_argument(
        "--normalization",
        choices=NORMALIZATIONS,
        default="standardize",
        help="standardize: training mean/std; unit: pixels stay in [0, 1]",
    )
    add_data_options(q)
    q.add_argument(
        "--model",
        help=f"read image files at this registered model's input size (default {DEFAULT_PHOTO_SIZE} pixels a side, "
        "ViT's usual); --image-size sets one",
    )
    q.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="data.FIELD=VALUE",
        help="a data option, e.g. --set data.crop_pct=0.9 (see `vitlab train --help`); repeatable",
    )
    q.set_defaults(func=run_info)
    q = data_sub.add_parser("download", help="fetch a dataset's official files and verify their checksums")
    q.add_argument("name", help="mnist, fashion-mnist, cifar10 or cifar100")
    q.add_argument(
        "--data-dir",
        dest="data_dir",
        default=None,
        help="target folder (default: $VITLAB_DATA/NAME, else ~/.cache/vitlab/data/NAME)",
    )
    q.add_argument("--to", dest="data_dir", help=argparse.SUPPRESS)
    q.add_argument(
        "--mirror",
        default=None,
        help="base URL serving the same file names (default: $VITLAB_DATA_MIRROR, else the official site)",
    )
    q.add_argument("--deadline", type=float, default=DEADLINE, help="seconds allowed for each file")
    q.set_defaults(func=run_download)
    q = data_sub.add_parser(
        "shard", help="write a photo source as WebDataset shards (resumable, with a sha256 manifest)"
    )
    q.add_argument("--dataset", default="folder", choices=photo_sources(), help="the source read (default folder)")
    q.add_argument("--data-dir", required=True, help="where the source is (as for vitlab train)")
    add_output(
        q, "--out", rule=Output("shard folder"), required=True, help="folder the shards and shards.json are written to"
    )
    q.add_argument("--max-count", type=int, default=None, help="samples in a shard at most")
    q.add_argument("--max-size", type=int, default=None, help="bytes in a shard at most (about; planned)")
    q.add_argument("--max-side", type=int, default=None, help="re-encode images larger than this many pixels a side")
    q.add_argument("--json", action="store_true", help="add KEY.json with each sample's source name and class")
    q.add_argument("--workers", type=int, default=0, help="worker processes writing shards (default 0: this one)")
    q.add_argument("--overwrite", action="store_true", help="rewrite shards a previous run finished")
    q.set_defaults(func=run_shard)
