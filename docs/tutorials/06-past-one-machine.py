# %% [markdown]
# # 6. Past one machine
#
# Three things grow past a laptop: the **data** (more images than memory), the **training** (more than one
# GPU or machine for one model), and the **study** (a hundred independent runs). vitlab has one answer
# for each, and none changes the numbers: a streamed run, a DDP run and a Ray study give what the
# in-memory, single-process, local runs give at the same seeds.
#
# ## More images than memory: streaming and WebDataset shards
#
# Small data read for several epochs is decoded once into memory (uint8 at the model's size). A one-epoch run,
# or a dataset that would not comfortably fit (above 512 MiB or an eighth of free memory), is **streamed**:
# decoded on demand in `DataLoader` workers (`--set data.workers=N`), moved as uint8 and normalised on the
# device, in memory that does not grow with the number of images.
# vitlab says which it chose; `--loader memory|stream` forces one. WebDataset tar shards
# (`KEY.jpg|png` + `KEY.cls` members) are read with `--dataset wds --data-dir 'shards/train-{000000..000009}.tar'`.
#
# Here we write two tiny shards of digits and read them streamed, as a training would:

# %%
import io
import tarfile
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from vitlab.data import load_dataset

work = Path(tempfile.mkdtemp())
digits = load_dataset("digits", seed=0, normalization="unit")
images, labels = digits.train.images[:200], digits.train.labels[:200]
for shard in range(2):
    with tarfile.open(work / f"train-{shard:06d}.tar", "w") as tar:
        for i in range(shard * 100, (shard + 1) * 100):
            png = io.BytesIO()
            Image.fromarray((images[i, 0].numpy() * 255).astype(np.uint8)).save(png, format="PNG")
            for name, data in ((f"{i:05d}.png", png.getvalue()), (f"{i:05d}.cls", str(int(labels[i])).encode())):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
pattern = str(work / "train-{000000..000001}.tar")
print("shards:", sorted(p.name for p in work.glob("*.tar")))

shards = load_dataset("wds", pattern, seed=0, loader="stream", image_size=16, workers=0)
print("loader:", shards.loader, "-", shards.loader_reason)
print("splits:", {name: len(getattr(shards, name)) for name in ("train", "val")})

# %% [markdown]
# The same from the command line trains streamed:
#
# ```bash
# vitlab train --dataset wds --data-dir 'shards/train-{000000..000009}.tar' --loader stream --image-size 32 --out runs/shards
# ```
#
# The streamed order is seeded per image, so a run resumes exactly (`--resume`). The other sources — a
# folder, a manifest, a Hugging Face dataset — are in [the datasets how-to](../how-to/datasets.md).
#
# ## One training on many GPUs: torchrun (DDP)
#
# ```bash
# torchrun --nproc_per_node=4 -m vitlab train --dataset folder --data-dir photos --out runs/ddp
# torchrun --nnodes=2 --nproc_per_node=8 --rdzv-id=run1 --rdzv-backend=c10d --rdzv-endpoint=HEAD_IP:29500 \
#   -m vitlab train ...                          # on each of two machines (the README has a Slurm script)
# ```
#
# Each process trains on its shard of every batch (`batch_size` is per process; the global batch is
# `batch_size × processes × accumulate`); a streamed dataset is sharded by rank, each image once per epoch.
# Rank 0 writes the run folder, which `--resume` continues with any number of processes. A model too large to
# replicate trains sharded with `--set distributed=fsdp` (and `--set grad_checkpointing=true` to recompute
# activations); its run folder holds the same files.
#
# ## A hundred runs on a cluster: Ray
#
# `vitlab compare` runs its grid in parallel processes on one machine (`--jobs`, default one per usable
# core; numbers identical to `--jobs 1` at the same `--threads`). Each run is independent, so a study can
# also spread over machines as Ray tasks:
#
# ```bash
# pip install 'vitlab[cluster]'                  # on every machine: the same vitlab, torch and ray versions
# ray start --head --port=6379                   # on the head machine
# ray start --address=HEAD_IP:6379               # on each worker machine
# vitlab compare --executor ray --address auto --preset textbook --seeds 17   # on the head: 2 x 3 x 17 = 102 runs
# ```
#
# Every machine needs the dataset where `--data-dir` points (or in `/usr/share/datasets` or
# `$VITLAB_DATA`). Each run is one Ray task reserving `--threads` CPUs (default 1) and, where the cluster has
# GPUs, one GPU; runs that depend on each other (a teacher and its student, one pretrained encoder) travel
# as one task. The report (`runs/NAME/`) is written on the machine that ran the command. From a laptop, join
# a remote cluster with `--address ray://HEAD_IP:10001`; without `--address` a local Ray is started for the
# study. One large training stays on `torchrun` (above).
#
# Back to the [start](../index.md), or on to the [how-to guides](../how-to/index.md).
