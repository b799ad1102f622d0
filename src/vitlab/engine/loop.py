"""The one training loop: ``fit(task, config, run_dir) -> FitResult``.

    for epoch in epochs:                          every source of randomness reseeded from (seed, epoch, rank)
        for batch in this rank's shard:           a seeded permutation (DistributedSampler's rule)
            loss, sums = task.step(net, batch)    under bf16 autocast on CUDA; the only part tasks differ in
            backward (every `accumulate` batches: clip, optimiser, schedule, EMA, task.after_step)
        metrics = task.validate(eval model)       all-reduced over ranks
        last/ checkpoint and state, best/ when the monitored metric improves, metrics.jsonl
    test = task.test(best model)                  the checkpoint chosen by validation, never the last one

A *task* (:class:`~vitlab.engine.task.Task`) turns batches into a loss and says what a checkpoint holds; the engine owns
seeding, device, DDP (torchrun), optimiser and schedule, clipping, accumulation, EMA, the time limit,
progress, history, checkpoints, exact resume and the divergence check. A non-finite loss stops the
run with :class:`~vitlab.errors.DivergenceError` naming the step; the last finite checkpoint stays.

With ``config.compile`` the step runs ``torch.compile(net)``, a wrapper beside the task's model: the
model, its state-dict keys, the EMA and every checkpoint stay those of the eager module.

With ``config.distributed == "fsdp"`` the task's model is sharded in place (:func:`~.distributed.shard`) and
trains as 1/N of itself on each process. After each epoch the full weights are gathered into a plain copy of
the model on every process: validation, test, ``best`` and the checkpoints use it (evaluation then needs no
step in lockstep across processes), and rank 0 writes the full optimiser state, so the files are those of a
one-process run and resume either way.

Determinism: each epoch restarts Python's, NumPy's and torch's generators, and the task's own, from
``epoch_seed(seed, epoch, rank)``, and the shuffle from ``seed + epoch``; so a run resumed at an epoch
boundary ends with the same weights as an uninterrupted one, and the state needs no RNG snapshot.
With ``checkpoint_every_steps`` (or ``_minutes``) the state is also committed inside an epoch, after an
optimiser step; it adds the *position* there: how many of the epoch's batches each rank has taken, its
generators' states (:func:`rng_state`, the task's :meth:`~vitlab.engine.task.Task.generators` included) and its running
sums. A resume restarts that epoch as above, sets the generators back and takes the epoch's order from
that batch on: a streamed item's augmentation follows ``(epoch seed, item)`` only, so the batches after it
are those the uninterrupted run took, and so are the final weights.
"""

from __future__ import annotations

import copy
import math
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..data import ShardSampler
from ..data.dataset import identity_changes
from ..errors import ConfigError, DivergenceError, RunFolderError
from ..interrupts import raise_if_interrupted
from .config import RunConfig
from .distributed import (
    DistEnv,
    all_gather_objects,
    all_reduce_sum,
    barrier,
    full_model_state,
    full_optimizer_state,
    load_full_state,
    setup,
    shard,
    teardown,
)
from .optim import ModelEma, build_scheduler, retune_state
from .report import Reporter
from .task import Task

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..runs import RunDir


@dataclass
class FitResult:
    """What :func:`fit` returns. ``model`` is the deliverable of the model chosen by validation (the
    last one without a monitor), unwrapped, in eval mode; ``test`` its test metrics. ``cost``: what the
    training cost (:meth:`Engine.cost`): trainable and total parameters of the trained model, the bytes of the
    optimiser's state, and the mean seconds per optimiser step."""

    model: nn.Module
    history: list[dict[str, Any]]
    best_score: float | None
    best_epoch: int
    test: dict[str, float] | None
    seconds: float
    params: int
    checkpoints: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)

    def chosen_val(self) -> dict[str, Any]:
        """The validation figures of the chosen epoch (``best_epoch``: the last one without a monitor),
        without their ``val_`` prefix; ``{}`` when no epoch ran."""
        record = next((r for r in self.history if r["epoch"] == self.best_epoch), {})
        return {k.removeprefix("val_"): v for k, v in record.items() if k.startswith("val_")}


def compile_forward(model: nn.Module) -> nn.Module:
    """``model`` with its ``forward`` replaced by ``torch.compile(model.forward)``, for inference: the
    module tree, parameters and state-dict keys are unchanged. Returns ``model``. (A deep copy would
    keep calling the original's forward, so training compiles a wrapper instead; see :func:`fit`.)"""
    model.forward = torch.compile(model.forward)
    return model


def checkpoint_blocks(model: nn.Module) -> None:
    """Turn on activation checkpointing in every module of ``model`` that has it (``set_grad_checkpointing``);
    refuses a model without one in one line."""
    modules = [m for m in model.modules() if hasattr(m, "set_grad_checkpointing")]
    if not modules:
        raise ConfigError(
            f"grad_checkpointing=true: {type(model).__name__} has no checkpointed block loop (the ViTs have one): "
            f"drop --set grad_checkpointing"
        )
    for module in modules:
        cast(Any, module).set_grad_checkpointing(True)


def plain_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose parameters take no memory (on the meta device) until a full state dict is
    loaded into it with ``assign=True``; buffers are copied."""
    memo: dict[int, Any] = {
        id(p): nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad) for p in model.parameters()
    }
    return copy.deepcopy(model, memo)


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """The states of Python's, NumPy's and torch's (CPU and CUDA) global generators and of ``generators``,
    in types ``torch.load(weights_only=True)`` reads back."""
    kind, keys, pos, has_gauss, gauss = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    return {
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
        "task": {name: g.get_state() for name, g in generators.items()},
    }


def set_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    """Set the global generators and ``generators`` to ``state`` (:func:`rng_state`)."""
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    random.setstate(state["python"])
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():  # none in a state from a CPU run; ignored on a CPU resume
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, saved in state["task"].items():
        generators[name].set_state(saved)


def epoch_seed(seed: int, epoch: int, rank: int) -> int:
    """A well-mixed 63-bit seed for ``(seed, epoch, rank)``."""
    words = np.random.SeedSequence([seed, epoch, rank]).generate_state(2)
    return int(words[0]) << 31 ^ int(words[1])


def fit(task: Task, config: RunConfig, run_dir: RunDir | None = None, reporter: Reporter | None = None) -> FitResult:
    """Train ``task.model`` under ``config``; with ``run_dir``, open it (refusing a foreign run, or
    resuming) and write checkpoints, history and summary there. Under torchrun (``RANK`` /
    ``WORLD_SIZE`` set) this process joins the job and trains with DDP; rank 0 writes the files."""
    env = setup(config.device)
    try:
        return Engine(task, config, run_dir, reporter or Reporter(), env).run()
    except BaseException:
        if run_dir is not None and env.is_main:
            run_dir.discard_if_unused()
        raise
    finally:
        if run_dir is not None and env.is_main:
            run_dir.close()
        teardown(env)


class Engine:
    """One call of :func:`fit`: the objects it builds and the loop over epochs."""

    def __init__(self, task: Task, config: RunConfig, run_dir: RunDir | None, reporter: Reporter, env: DistEnv) -> None:
        self.task, self.config, self.run_dir, self.reporter, self.env = task, config, run_dir, reporter, env
        self.sharded = config.distributed == "fsdp"
        if self.sharded and env.world_size == 1:
            raise ConfigError(
                "distributed=fsdp shards the model over torchrun's processes, but this is one process: launch with "
                "torchrun --nproc_per_node N -m vitlab train ..., or drop --set distributed=fsdp"
            )
        if self.sharded and config.ema_decay:
            raise ConfigError("ema_decay is not available with distributed=fsdp yet: drop one of them")
        seed_everything(config.seed)
        task.prepare(env, config.amp)
        model = task.model
        if config.grad_checkpointing:
            checkpoint_blocks(model)
        net: nn.Module = model
        if self.sharded:
            self.plain = plain_copy(model)  # the full weights every process evaluates (see _gather)
            shard(model, env)
        elif env.world_size > 1:
            net = DistributedDataParallel(model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
        self.net: nn.Module = torch.compile(net) if config.compile else net  # type: ignore[assignment]
        self.loader = ShardSampler(
            task.train_size(),
            config.batch_size,
            shuffle=True,
            seed=config.seed,
            drop_last=task.drop_last and task.train_size() > config.batch_size,
            rank=env.rank,
            world_size=env.world_size,
        )
        self.steps_per_epoch = max(1, math.ceil(len(self.loader) / config.accumulate))
        self.optimizer = task.parameters_to_optimise(config)
        self.total_steps = self.steps_per_epoch * config.epochs
        self.scheduler = build_scheduler(
            self.optimizer,
            config.schedule,
            self.total_steps,
            round(config.warmup_epochs * self.steps_per_epoch),
            config.lr,
            config.min_lr,
        )
        self.ema = ModelEma(model, config.ema_decay) if config.ema_decay else None
        self.autocast = torch.autocast(
            env.device.type, dtype=torch.bfloat16, enabled=config.amp and env.device.type == "cuda"
        )
        self.history: list[dict[str, Any]] = []
        self.best_score: float | None = None
        self.best_epoch, self.start_epoch, self.step = 0, 0, 0
        self.best_state: dict[str, torch.Tensor] | None = None
        self.position: dict[str, Any] | None = None  # where a mid-epoch state stopped (see train_epoch)
        self.started = time.perf_counter()
        self.committed_at = self.started  # when the state was last committed (checkpoint_every_minutes)
        self.stepping = [0.0, 0]  # this process's seconds in the training loop, and its optimiser steps
        self.full_optimizer: dict[str, Any] = {}  # under FSDP: the gathered optimiser state (rank 0's, see _gather)
        self._gather()
        trainable, total = self.parameter_counts()
        if trainable < total:  # a frozen or lightly tuned encoder: say what trains
            reporter.note(f"training {trainable:,} of {total:,} parameters ({trainable / total:.2%}); the rest frozen")
        if run_dir is not None:
            if env.is_main:
                run_dir.open(
                    task.run_kind,
                    config.to_dict(),
                    resume=config.resume,
                    overwrite=config.overwrite,
                    resume_free=config.RESUME_FREE,
                )
            barrier()
            if config.resume and run_dir.has_state():
                self._load_state(run_dir.load_state())
            elif config.resume and env.is_main:
                run_dir.note(f"{run_dir.path}: no epoch of the run had finished; it starts from the first")
            if env.is_main:
                run_dir.record_resumed_settings()

    @property
    def full_model(self) -> nn.Module:
        """The module holding the trained weights in full: the task's model, or under FSDP its gathered copy."""
        return self.plain if self.sharded else self.task.model

    @property
    def eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.full_model

    def _gather(self) -> None:
        """Under FSDP, gather the full weights into :attr:`full_model` on every process and, with a run folder,
        the full optimiser state onto rank 0 (collective: every process calls it at the same point). Not the
        optimiser's before its first step: torch's gather would first make its state with a step of zero gradients."""
        if not self.sharded:
            return
        self.plain.load_state_dict(full_model_state(self.task.model), assign=True)
        if self.run_dir is not None and self.optimizer.state:
            self.full_optimizer = full_optimizer_state(self.task.model, self.optimizer)

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> FitResult:
        cfg, task = self.config, self.task
        self.reporter.start(cfg.epochs, self.start_epoch, len(self.loader))
        for epoch in range(self.start_epoch, cfg.epochs):
            record = self.train_epoch(epoch)
            if record is None:  # the time limit ran out before this epoch's first step
                break
            self._gather()
            final = epoch + 1 == cfg.epochs or self._out_of_time()
            if final or (task.monitor is not None and (epoch + 1) % cfg.eval_every == 0):
                record.update(task.validate(self.eval_model))
            record["seconds"] = time.perf_counter() - record.pop("_start")
            self.history.append(record)
            score = record.get(task.monitor) if task.monitor else None
            improved = task.monitor is None or (
                score is not None and (self.best_score is None or score > self.best_score)
            )
            if improved:
                self.best_score, self.best_epoch = score, record["epoch"]
                if task.monitor is not None:  # without a monitor the best model is the last one
                    self.best_state = {k: v.detach().clone() for k, v in self.eval_model.state_dict().items()}
            if self.run_dir is not None and self.env.is_main:
                self._write_checkpoints(record["epoch"], improved)
            self.reporter.epoch(record)
            if final:
                break
        self.reporter.close()
        if self.history and task.monitor is not None and task.monitor not in self.history[-1]:
            self._validate_last()  # the time limit stopped the run after an epoch it did not validate
        best = self._best_model()
        test = task.test(best)
        result = FitResult(
            task.deliverable(best).eval(),
            self.history,
            self.best_score,
            self.best_epoch,
            test,
            sum(r["seconds"] for r in self.history),
            sum(p.numel() for p in task.deliverable(self.full_model).parameters() if p.requires_grad),
        )
        result.cost = self.cost()
        if self.run_dir is not None and self.env.is_main:
            last = self.run_dir.checkpoint("last")
            best_path = self.run_dir.checkpoint("best") if task.monitor is not None else last
            # only what the folder holds: no epoch may have finished (a time limit before the first step)
            result.checkpoints = {k: p for k, p in {"best": best_path, "last": last}.items() if p.is_file()}
            task.finish(self.run_dir, result.model)
        return result

    def parameter_counts(self) -> tuple[int, int]:
        """``(trainable, total)`` parameters of the trained model (adapters included)."""
        params = list(self.task.model.parameters())
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

    def cost(self) -> dict[str, Any]:
        """What the training cost: ``trainable_params`` and ``total_params`` of the trained model,
        ``optimizer_state_bytes`` (the optimiser's state tensors: AdamW's two moments per trainable
        weight) and ``step_seconds`` (the training loop's wall time per optimiser step, validation left out)."""
        trainable, total = self.parameter_counts()
        state = sum(
            t.numel() * t.element_size()
            for per_param in self.optimizer.state.values()
            for t in per_param.values()
            if isinstance(t, torch.Tensor)
        )
        seconds, steps = self.stepping
        return {
            "trainable_params": trainable,
            "total_params": total,
            "optimizer_state_bytes": state,
            "step_seconds": seconds / max(1, steps),
        }

    def _validate_last(self) -> None:
        """Validate the last epoch's model, which the loop left unvalidated, and commit it again
        (as ``best/`` when it improved), so that a run with a monitor always ends with a chosen model."""
        task, record = self.task, self.history[-1]
        record.update(task.validate(self.eval_model))
        score = record.get(task.monitor) if task.monitor else None
        if score is not None and (self.best_score is None or score > self.best_score):
            self.best_score, self.best_epoch = score, record["epoch"]
            self.best_state = {k: v.detach().clone() for k, v in self.eval_model.state_dict().items()}
            improved = True
        else:
            improved = False
        if self.run_dir is not None and self.env.is_main:
            self._write_checkpoints(record["epoch"], improved)

    def train_epoch(self, epoch: int) -> dict[str, Any] | None:
        """One pass over this rank's shard; returns the epoch's training record (``None`` if the time
        limit allowed no step)."""
        cfg, env, task = self.config, self.env, self.task
        seed = epoch_seed(cfg.seed, epoch, env.rank)
        seed_everything(seed)
        task.start_epoch(epoch, seed)
        self.loader.set_epoch(epoch)
        index = self.loader.indices()
        every = self.reporter.every
        self.net.train()
        sums: dict[str, torch.Tensor] = {}
        count, start, batches, first = 0, time.perf_counter(), len(self.loader), 0
        if self.position is not None:  # a mid-epoch state: this epoch continues where it stopped
            first, mine = self.position["batch"], self.position["ranks"][env.rank]
            set_rng_state(mine["rng"], task.generators())
            sums = {k: v.to(env.device) for k, v in mine["sums"].items()}
            count, self.position = mine["count"], None
        stream = task.batches(index[first * cfg.batch_size : batches * cfg.batch_size], cfg.batch_size)
        waited = 0.0  # seconds the step spent waiting for its batch
        for b in range(first, batches):
            if self._out_of_time():
                break
            asked = time.perf_counter()
            batch = self._next_batch(stream)
            waited += time.perf_counter() - asked
            raise_if_interrupted()
            if batch is None:  # unreadable images emptied this rank's last batches: step what was summed
                if b % cfg.accumulate:
                    self._optimiser_step()
                break
            with self.autocast:
                loss, batch_sums, n = task.step(self.net, batch, epoch)
            if not torch.isfinite(loss.detach()).item():
                self._diverged(epoch, b + 1, float(loss.detach()))
            boundary = (b + 1) % cfg.accumulate == 0 or b + 1 == batches
            (loss / cfg.accumulate).backward()
            if boundary:
                self._optimiser_step()
            with torch.no_grad():
                for k, v in batch_sums.items():
                    sums[k] = sums.get(k, 0) + v.detach().double()
            count += n
            if every and ((b + 1) % every == 0 or b + 1 == batches):
                running = {k: float(v) / count for k, v in sums.items()}
                self.reporter.step(epoch + 1, b + 1, running, count * env.world_size / (time.perf_counter() - start))
            if boundary and b + 1 < batches and self._commit_due():
                self._commit_position(epoch, b + 1, sums, count)
        getattr(stream, "close", lambda: None)()  # stops a loader's workers when the time limit cut the epoch
        if count == 0:
            return None
        names = sorted(sums)
        totals = all_reduce_sum(
            torch.stack(
                [sums[k].to(env.device) for k in names]
                + [torch.tensor(float(count), dtype=torch.float64, device=env.device)]
            )
        )
        *values, seen = totals.tolist()
        seconds = time.perf_counter() - start
        self.stepping[0] += seconds
        record: dict[str, Any] = {
            "epoch": epoch + 1,
            **{f"train_{k}": v / seen for k, v in zip(names, values)},
            "lr": self.rate(),
            "images_per_s": seen / seconds,
            "data_wait": waited / seconds,
            "_start": start,
        }
        return record

    def _next_batch(self, stream: Iterator[Any]) -> Any | None:
        """The next batch, or None once ``stream`` ends (a streamed split skips a batch whose every image
        was unreadable) -- on every rank as soon as one rank's stream ends, so no rank waits for a step the
        others never take."""
        batch = next(stream, None)
        if self.env.world_size > 1:
            ended = torch.tensor(float(batch is None), device=self.env.device)
            if all_reduce_sum(ended).item():
                return None
        return batch

    def _optimiser_step(self) -> None:
        cfg = self.config
        if cfg.clip_grad is not None:
            nn.utils.clip_grad_norm_(self.task.model.parameters(), cfg.clip_grad)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if cfg.time_limit_s is not None:  # the schedule follows elapsed time when that is ahead
            elapsed = (time.perf_counter() - self.started) / cfg.time_limit_s
            self.scheduler.last_epoch = max(self.scheduler.last_epoch, int(self.total_steps * elapsed) - 1)
        self.scheduler.step()
        if self.ema is not None:
            self.ema.update(self.task.model)
        self.step += 1
        self.stepping[1] += 1
        self.task.after_step(self.step, self.total_steps)

    def rate(self) -> float:
        """The learning rate set for the run at this step: the largest group's (the head's, under layer-wise
        decay, whose lower layers train at smaller rates)."""
        return float(max(self.scheduler.get_last_lr()))

    def _out_of_time(self) -> bool:
        limit = self.config.time_limit_s
        return limit is not None and time.perf_counter() - self.started > limit

    def _diverged(self, epoch: int, batch: int, loss: float) -> None:
        where = f" ({self.run_dir.checkpoint('last').parent} keeps the last finite epoch)" if self.run_dir else ""
        raise DivergenceError(
            f"training diverged: loss {loss} at epoch {epoch + 1}, batch {batch} (learning rate "
            f"{self.rate():.3g}); the learning rate is likely too high: lower --lr{where}"
        )

    def _best_model(self) -> nn.Module:
        model = self.eval_model
        if self.best_state is None or self.best_epoch == (self.history[-1]["epoch"] if self.history else 0):
            return model.eval()
        best = copy.deepcopy(model)
        best.load_state_dict(self.best_state)
        return best.eval()

    # -- files ----------------------------------------------------------------------------------

    def _provenance(self, epoch: int) -> dict[str, Any]:
        return {"epoch": epoch, "weights": "ema" if self.ema is not None else "model", "task": self.task.run_kind}

    def _state(self, epoch: int, position: dict[str, Any] | None) -> dict[str, Any]:
        """The training state after ``epoch`` epochs (and, with a ``position``, that many batches of the next)."""
        task = self.task
        return {
            "kind": task.run_kind,
            "config": self.config.to_dict(),
            "epoch": epoch,
            "step": self.step,
            "model": self.full_model.state_dict(),
            "optimizer": self.full_optimizer if self.sharded else self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "task": task.state_dict(),
            "history": self.history,
            "best_score": self.best_score,
            "best_epoch": self.best_epoch,
            "best_state": self.best_state,
            "data": task.data_config().splits,
            "position": position,
        }

    def _commit_due(self) -> bool:
        """Whether a mid-epoch commit is due after this optimiser step: every ``checkpoint_every_steps`` steps, or
        ``checkpoint_every_minutes`` after the last commit by the main process's clock (sent to every process, so
        all of them commit at the same step)."""
        cfg = self.config
        if self.run_dir is None:
            return False
        due = bool(cfg.checkpoint_every_steps) and self.step % cfg.checkpoint_every_steps == 0
        if cfg.checkpoint_every_minutes:
            late = self.env.is_main and time.perf_counter() - self.committed_at >= 60 * cfg.checkpoint_every_minutes
            due = bool(all_reduce_sum(torch.tensor([float(late)], device=self.env.device)).item()) or due
        return due

    def _commit_position(self, epoch: int, batch: int, sums: dict[str, torch.Tensor], count: int) -> None:
        """Commit the state inside epoch ``epoch`` (0-based) after its first ``batch`` batches, each rank's
        generators and running sums gathered to the main process (:meth:`RunDir.commit_state`); ``last/``,
        ``best/`` and the metrics stay those of the last finished epoch (collective: under FSDP every process
        gathers the full state first)."""
        assert self.run_dir is not None
        self._gather()
        mine = {"rng": rng_state(self.task.generators()), "sums": {k: v.cpu() for k, v in sums.items()}, "count": count}
        ranks = all_gather_objects(mine)
        if self.env.is_main:
            position = {"batch": batch, "world_size": self.env.world_size, "ranks": ranks}
            self.run_dir.commit_state(epoch, self._state(epoch, position))
        self.committed_at = time.perf_counter()

    def _write_checkpoints(self, epoch: int, improved: bool, best: nn.Module | None = None) -> None:
        """Commit the epoch's set as one step (:meth:`RunDir.commit_epoch`): the training state, ``last/``,
        ``best/`` (when ``improved``: the eval model, or ``best``) and the metrics; a kill at any point
        leaves the previous epoch's set or this one."""
        run_dir, task = self.run_dir, self.task
        assert run_dir is not None
        data = task.data_config().to_dict()
        name = getattr(task.deliverable(task.model), "registered_name", None)
        state = self._state(epoch, self.position)  # a position only when it repairs a mid-epoch state's folder
        kind = task.checkpoint_kind
        checkpoints = {
            "last": {
                "model": task.deliverable(self.eval_model),
                "kind": kind,
                "data": data,
                "name": name,
                "provenance": self._provenance(epoch),
            }
        }
        if improved and task.monitor is not None:
            checkpoints["best"] = {
                "model": task.deliverable(best if best is not None else self.eval_model),
                "kind": kind,
                "data": data,
                "name": name,
                "provenance": {**self._provenance(self.best_epoch), task.monitor: self.best_score},
            }
        run_dir.commit_epoch(epoch, state, checkpoints, self.history)
        self.committed_at = time.perf_counter()

    def _check_data(self, recorded: Any) -> None:
        """Refuse in one line to resume on data other than the run's: the splits' identity ``recorded`` in its
        state (image counts, fingerprints, byte sizes: :func:`~vitlab.data.dataset.identity_changes`) against the
        data loaded now; a state without it (an earlier vitlab's) is not checked."""
        if not isinstance(recorded, dict) or not recorded:
            return
        data = self.task.data_config()
        changed = identity_changes(recorded, data.splits)
        if changed:
            assert self.run_dir is not None
            where = f" in {data.data_dir}" if data.data_dir else ""
            raise RunFolderError(
                f"resuming {self.run_dir.path} on other data than it trained with: {data.dataset}{where} changed "
                f"({'; '.join(changed)}); put back the data it trained on, or start a new run"
            )

    def _load_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (``last/state.pt``), refusing in one line a state of another kind
        of run or recorded under other settings; on the main process, rewrite the folder's set from it
        when the files do not agree with it (a run an earlier vitlab wrote, or files changed by hand)."""
        assert self.run_dir is not None
        path, task = self.run_dir.path / "last" / "state.pt", self.task
        kind = state.get("kind")
        if kind is not None and kind != task.run_kind:
            raise RunFolderError(
                f"{path} holds the state of a {kind} run, not of a {task.run_kind} run: it cannot resume"
            )
        recorded = state.get("config")
        if isinstance(recorded, dict):
            changed = self.run_dir.config_changes(recorded, self.config.to_dict(), self.config.RESUME_FREE)
            if changed:
                raise RunFolderError(
                    f"resuming {self.run_dir.path} with settings other than those it trained with: "
                    f"{'; '.join(changed)} (was config.json edited?); use the run's settings or start a new run"
                )
            rates = (self.config.lr, self.config.min_lr)
            if rates != (recorded.get("lr"), recorded.get("min_lr")):  # --resume --set lr=... on purpose
                retune_state(state, *rates)
        self._check_data(state.get("data"))
        position = state.get("position")
        if position is not None and position["world_size"] != self.env.world_size:
            raise RunFolderError(
                f"{path} stopped inside an epoch of a run on {position['world_size']} process(es), this one has "
                f"{self.env.world_size}: resume it with {position['world_size']} (torchrun --nproc_per_node)"
            )
        device = self.env.device
        try:
            if self.sharded:
                load_full_state(self.task.model, self.optimizer, state["model"], state["optimizer"])
            else:
                self.task.model.load_state_dict(state["model"])
                self.task.model.to(device)
                self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            if self.ema is not None:
                self.ema.load_state_dict(state["ema"])
            self.task.load_state_dict(state["task"])
            self.history = list(state["history"])
            self.best_score, self.best_epoch = state["best_score"], state["best_epoch"]
            self.best_state = state.get("best_state")
            self.start_epoch, self.step = state["epoch"], state["step"]
            self.position = state.get("position")
            self._gather()
        except (RuntimeError, KeyError, ValueError, TypeError, IndexError, AttributeError) as err:
            first = " ".join(str(err).split())[:200]
            raise RunFolderError(
                f"{path} does not fit the {task.run_kind} run configured now ({type(err).__name__}: {first}); "
                f"resume with the run's own settings, or start a new run"
            ) from err
        if self.env.is_main and self.position is not None:
            self.run_dir.note(
                f"{self.run_dir.path}: continues epoch {self.start_epoch + 1} after its batch {self.position['batch']} "
                f"of {len(self.loader)} (optimiser step {self.step})"
            )
        if self.env.is_main:
            problems = self.run_dir.check_committed(self.start_epoch)
            if problems:
                known = self.best_state is not None or self.best_epoch == self.start_epoch
                best = self._best_model() if task.monitor is not None and self.best_epoch and known else None
                self._write_checkpoints(self.start_epoch, best is not None, best)
                self.run_dir.note(
                    f"{self.run_dir.path}: its files did not form one consistent set ({'; '.join(problems)}); "
                    f"rewrote last/, best/ and metrics from {path} (epoch {self.start_epoch})"
                )
