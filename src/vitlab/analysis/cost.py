"""The token-count cost model: why the number of patches, not the image size, is the price.

For an image cut into ``N`` tokens of width ``D`` (``H`` heads of ``d = D / H``), one ViT
layer costs, in forward multiply-adds (FLOPs count each as 2)::

    qkv        N x D x 3D          proj   N x D x D
    scores     H x N x N x d       mlp    2 x N x D x hidden
    weights@V  H x N x N x d

and full attention stores ``H x N x N`` scores per image per layer. Everything except the
scores and ``weights @ V`` is linear in ``N``; those two are what attention variants change.
Each kind of attention is one function returning an :class:`AttentionCost`, looked up by name in
:data:`ATTENTION_COSTS`, so a table can grow a column per kind. Per head, for windows of ``M``
tokens, ``k`` low-rank rows and ``L`` latents:

    full     N^2 scores                  window   nW M^2 ~ N M scores (padded to whole windows)
    linear   d^2 + d state, no scores    lowrank  N k scores (+ projecting K and V to k rows)
    latent   2 N L scores (latents read the tokens, tokens read the latents)
    sparse   a band of radius l, a stride s and G global prefix tokens, in blocks of b = l tokens:
             ~ N (G + 3b + N/s) slots (P ~ N (2l + 1 + N/s) of them allowed); with l ~ s ~ sqrt(N), ~ 4 N^1.5

The layers these price are in :mod:`vitlab.layers.window_attention`, :mod:`vitlab.layers.sparse_attention`
and :mod:`vitlab.layers.efficient_attention`; tests hold every formula to PyTorch's FLOP counter. Sparse
attention is priced as its blocked kernel (:func:`vitlab.ops.attention.sparse_attention`) runs: the slots
of its score rows, padding and the slots masked out included, as window attention's padded windows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..checks import Bool, Check, Float, Int, Maybe, check_fields
from ..errors import ConfigError
from ..models.config import MAX_CHANS, MAX_DEPTH, MAX_HEADS, MAX_TOKENS, MAX_WIDTH
from ..ops.attention import sparse_blocks
from ..ops.patches import check_divisible, num_tokens
from ..ops.windows import fit_window, padded_grid

BYTES_FP32 = 4
MAX_PRICED = 2**20  # image and patch sides, windows, batch: pricing allocates nothing, but stays finite


@dataclass(frozen=True)
class AttentionCost:
    """The token-mixing part of one attention layer.

    Attributes:
        entries: attention scores per head for one image (``N * N`` for full attention); for
            linear attention, the entries of its key-value state instead.
        score_flops: FLOPs forming the scores for the whole batch, all heads.
        value_flops: FLOPs applying the weights to the values (``weights @ V``), batch and heads.
        memory: bytes of the scores ``(B, H, entries)`` in fp32 (:data:`BYTES_FP32` each).
    """

    entries: int
    score_flops: int
    value_flops: int
    memory: int


def full_attention(tokens: int, dim: int, heads: int, batch: int = 1) -> AttentionCost:
    """Every token attends to every token: scores ``(B, H, N, N)``, ``2 B H N^2 d`` FLOPs each way."""
    entries = tokens * tokens
    flops = 2 * batch * entries * dim  # H heads x d = D
    return AttentionCost(entries, flops, flops, batch * heads * entries * BYTES_FP32)


def window_attention(
    grid: tuple[int, int],
    window: int,
    dim: int,
    heads: int,
    batch: int = 1,
    prefix: int = 0,
) -> AttentionCost:
    """Attention inside ``window x window`` windows of the patch ``grid`` (Swin's rule: a window no larger
    than the grid; the grid padded to whole windows): ``nW M^2`` scores per head. ``prefix`` tokens, if
    any, would attend to and be attended by every token: ``R (2T - R)`` more, ``T`` all tokens."""
    (mh, mw), _ = fit_window(grid, (window, window))
    ph, pw = padded_grid(grid, (mh, mw))
    tokens = grid[0] * grid[1] + prefix
    entries = (ph // mh) * (pw // mw) * (mh * mw) ** 2 + prefix * (2 * tokens - prefix)
    flops = 2 * batch * entries * dim
    return AttentionCost(entries, flops, flops, batch * heads * entries * BYTES_FP32)


def linear_attention(tokens: int, dim: int, heads: int, batch: int = 1) -> AttentionCost:
    """Kernel attention ``phi(Q) (phi(K)^T V) / phi(Q) sum phi(K)``: a ``d x d`` state and a ``d``
    normaliser per head, whatever ``N``; ``2 B N D d`` FLOPs to build the state, as many (plus
    ``2 B N D`` for the normaliser) to read it."""
    head_dim = dim // heads
    state = 2 * batch * tokens * dim * head_dim
    return AttentionCost(
        head_dim * head_dim + head_dim,
        state,
        state + 2 * batch * tokens * dim,
        batch * heads * (head_dim * head_dim + head_dim) * BYTES_FP32,
    )


def lowrank_attention(tokens: int, rank: int, dim: int, heads: int, batch: int = 1) -> AttentionCost:
    """Linformer: keys and values projected to ``rank`` rows (``2 B k N D`` FLOPs each), then
    ``N x k`` scores per head."""
    entries, project = tokens * rank, 2 * batch * rank * tokens * dim
    flops = 2 * batch * entries * dim + project
    return AttentionCost(entries, flops, flops, batch * heads * entries * BYTES_FP32)


def latent_attention(tokens: int, latents: int, dim: int, heads: int, batch: int = 1) -> AttentionCost:
    """``L`` latents pool keys and values (``L x N`` scores, weights applied to ``[K, V]``), then every
    token reads the ``L`` summaries (``N x L``): ``2 N L`` scores per head."""
    one = 2 * batch * tokens * latents * dim  # one N x L (or L x N) product over all heads
    entries = 2 * tokens * latents
    return AttentionCost(entries, 2 * one, 3 * one, batch * heads * entries * BYTES_FP32)


def offset_pairs(n: int, step: int, reach: int) -> int:
    """Pairs ``(i, j)`` of ``n`` positions whose offset ``i - j`` is a multiple of ``step`` with ``|i - j| <= reach``:
    ``n`` at offset 0 and ``n - |o|`` at each offset ``o = +-step, +-2 step, ...`` up to ``min(reach, n - 1)``."""
    k = min(reach, n - 1) // step
    return n + 2 * (k * n - step * k * (k + 1) // 2)


def conv_pairs(grid: tuple[int, int], kernel: int = 3) -> int:
    """Ordered pairs ``(i, j)`` of ``grid`` positions where ``j`` lies in the ``kernel x kernel`` window centred
    on ``i`` (``i`` itself included), windows cut at the borders: the pairs one convolution layer mixes. The
    window is a product of two offset bands, so the count is ``offset_pairs`` per axis multiplied; ``k^2 N``
    for an interior-only count, less at the borders (``40 x 40 = 1,600`` against ``9 x 196`` on 14 x 14)."""
    if kernel < 1 or kernel % 2 == 0:
        raise ConfigError(f"kernel {kernel} has no centre: use an odd size such as 3")
    reach = kernel // 2
    return offset_pairs(grid[0], 1, reach) * offset_pairs(grid[1], 1, reach)


def sparse_slots(n: int, local: int, stride: int, prefix: int = 0) -> int:
    """Scores per head that :func:`vitlab.ops.attention.sparse_attention` forms for ``n`` patch tokens behind
    ``prefix`` global tokens (:func:`vitlab.ops.attention.sparse_blocks`): each of ``ceil(n / b)`` query blocks
    of ``b`` against its ``(2r + 1) b`` band keys, each of the ``stride`` residue classes (``m`` tokens) against
    itself, the patch queries against the global keys and the global queries against every key."""
    block, reach, rows = sparse_blocks(n, local, stride)
    band = -(-n // block) * block * (2 * reach + 1) * block
    return band + stride * rows * rows + n * prefix + prefix * (n + prefix)


def sparse_attention(
    grid: tuple[int, int],
    local: int | None,
    stride: int | None,
    dim: int,
    heads: int,
    batch: int = 1,
    prefix: int = 0,
) -> AttentionCost:
    """A fixed sparse pattern on the patch ``grid`` (``local`` and ``stride`` ``None``: the grid's width) with
    ``prefix`` global tokens: :func:`sparse_slots` scores per head, ``2 B S D`` FLOPs each way."""
    width = grid[1]
    entries = sparse_slots(
        grid[0] * grid[1], width if local is None else local, width if stride is None else stride, prefix
    )
    flops = 2 * batch * entries * dim
    return AttentionCost(entries, flops, flops, batch * heads * entries * BYTES_FP32)


@dataclass(frozen=True)
class Workload:
    """A ViT forward pass to price: image side, patch side, and the encoder's sizes."""

    image: int
    patch: int
    dim: int = 768
    depth: int = 12
    heads: int = 12
    mlp_ratio: float = 4.0
    batch: int = 1
    class_token: bool = False
    in_chans: int = 3
    window_size: int = 7
    lowrank_k: int = 64
    num_latents: int = 16
    sparse_local: int | None = None
    sparse_stride: int | None = None

    checks: ClassVar[dict[str, Check]] = {
        "image": Int(1, MAX_PRICED),
        "patch": Int(1, MAX_PRICED),
        "dim": Int(1, MAX_WIDTH),
        "depth": Int(1, MAX_DEPTH),
        "heads": Int(1, MAX_HEADS),
        "mlp_ratio": Float(0, 64, low_open=True),
        "batch": Int(1, MAX_PRICED),
        "class_token": Bool(),
        "in_chans": Int(1, MAX_CHANS),
        "window_size": Int(1, MAX_PRICED),
        "lowrank_k": Int(1, MAX_TOKENS),
        "num_latents": Int(1, MAX_TOKENS),
        "sparse_local": Maybe(Int(0, MAX_PRICED)),
        "sparse_stride": Maybe(Int(1, MAX_PRICED)),
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        if self.dim % self.heads:
            raise ConfigError(
                f"dim {self.dim} is not divisible by heads {self.heads}: choose a head count that divides it"
            )

    @property
    def patches(self) -> int:
        """Patch tokens ``N = (image / patch)^2``; raises if the patch does not divide the image."""
        return num_tokens(self.image, self.image, self.patch)

    @property
    def grid(self) -> tuple[int, int]:
        """The patch grid ``(image / patch, image / patch)``; raises if the patch does not divide the image."""
        return check_divisible(self.image, self.image, self.patch)

    @property
    def tokens(self) -> int:
        """Sequence length: patch tokens plus the class token if there is one."""
        return self.patches + int(self.class_token)

    @property
    def hidden(self) -> int:
        """MLP hidden width, as the model builds it: ``int(dim * mlp_ratio)``."""
        return int(self.dim * self.mlp_ratio)


# Each kind's cost for a workload (its options are Workload fields). The ViT's kinds not listed
# ("lsa") cost what "full" costs.
ATTENTION_COSTS: dict[str, Callable[[Workload], AttentionCost]] = {
    "full": lambda w: full_attention(w.tokens, w.dim, w.heads, w.batch),
    "window": lambda w: window_attention(w.grid, w.window_size, w.dim, w.heads, w.batch, prefix=int(w.class_token)),
    "linear": lambda w: linear_attention(w.tokens, w.dim, w.heads, w.batch),
    "lowrank": lambda w: lowrank_attention(w.tokens, w.lowrank_k, w.dim, w.heads, w.batch),
    "latent": lambda w: latent_attention(w.tokens, w.num_latents, w.dim, w.heads, w.batch),
    "sparse": lambda w: sparse_attention(
        w.grid, w.sparse_local, w.sparse_stride, w.dim, w.heads, w.batch, prefix=int(w.class_token)
    ),
}


def attention_cost(work: Workload, attention: str = "full") -> AttentionCost:
    """Cost of one layer's token mixing under the named kind of attention."""
    if attention not in ATTENTION_COSTS:
        raise ConfigError(f"unknown attention {attention!r}; choose one of {', '.join(ATTENTION_COSTS)}")
    return ATTENTION_COSTS[attention](work)


def flops(work: Workload, attention: str = "full") -> dict[str, int]:
    """Forward FLOPs (2 per multiply-add) by part, summed over layers, and their ``total``.

    Counts the matrix products only (patch embedding, qkv, scores, weights@V, proj, MLP); norms,
    softmax, GELU, biases and the classifier head are left out.
    """
    b, n, d = work.batch, work.tokens, work.dim
    mix = attention_cost(work, attention)
    parts = {
        "patch_embed": 2 * b * work.patches * work.patch**2 * work.in_chans * d,
        "qkv": work.depth * 2 * b * n * d * 3 * d,
        "scores": work.depth * mix.score_flops,
        "weights_v": work.depth * mix.value_flops,
        "proj": work.depth * 2 * b * n * d * d,
        "mlp": work.depth * 2 * b * n * d * work.hidden * 2,
    }
    return {**parts, "total": sum(parts.values())}


@dataclass(frozen=True)
class CostRow:
    """One (image, patch) pair: tokens, attention entries per head per layer, their ratio to the
    table's first row, forward FLOPs and the attention-score memory per layer (bytes)."""

    image: int
    patch: int
    tokens: int
    entries: int
    ratio: float
    flops: int
    attention_memory: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# The textbook's (image, patch) pairs: greyscale 28x28 up to 224x224 photographs.
TEXTBOOK_PAIRS = ((28, 7), (28, 4), (64, 8), (224, 16), (224, 8))


def cost_table(
    pairs: tuple[tuple[int, int], ...] = TEXTBOOK_PAIRS, attention: str = "full", **sizes: Any
) -> list[CostRow]:
    """One :class:`CostRow` per ``(image, patch)`` pair; ``sizes`` are :class:`Workload` fields
    (``dim``, ``depth``, ``heads``, ``mlp_ratio``, ``batch``, ``class_token``, ``in_chans``, and the
    attention options ``window_size``, ``lowrank_k``, ``num_latents``, ``sparse_local``, ``sparse_stride``)."""
    if not pairs:
        raise ConfigError("no (image, patch) pairs to price: pass at least one, e.g. ((224, 16),)")
    works = [Workload(image=image, patch=patch, **sizes) for image, patch in pairs]
    mixes = [attention_cost(work, attention) for work in works]
    return [
        CostRow(
            work.image,
            work.patch,
            work.tokens,
            mix.entries,
            mix.entries / mixes[0].entries,
            flops(work, attention)["total"],
            mix.memory,
        )
        for work, mix in zip(works, mixes)
    ]


@dataclass(frozen=True)
class Interactions:
    """Token pairs one layer mixes on an ``(image, patch)`` pair's patch grid of ``tokens = N`` patches:
    a 3x3 convolution's exact count (:func:`conv_pairs`), its interior-only ``9N``, full attention's ``N^2``."""

    image: int
    patch: int
    grid: tuple[int, int]
    tokens: int
    conv3x3: int
    interior_9n: int
    attention: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def interactions(image: int, patch: int) -> Interactions:
    """:class:`Interactions` for square ``image`` cut into ``patch`` patches (class tokens left out)."""
    grid = check_divisible(image, image, patch)
    n = grid[0] * grid[1]
    return Interactions(image, patch, grid, n, conv_pairs(grid), 9 * n, n * n)


def cost_figure(
    images: tuple[int, ...], patch: int, kinds: tuple[str, ...] = ("full", "window", "linear"), **sizes: Any
) -> Any:
    """A matplotlib figure: attention memory per layer and forward FLOPs (time, at a fixed FLOP rate)
    against the image side for ``patch``-sized patches, log-log, one line per kind of attention.
    ``sizes`` are :class:`Workload` fields. On log-log axes a power law is a straight line: full
    attention's memory has slope 4 in the side (2 in ``N``), windowed and linear attention's 2 (1)."""
    from matplotlib.figure import Figure

    if len(images) < 2:
        raise ConfigError(f"a plot against resolution needs at least two image sides, got {list(images)}")
    fig = Figure(figsize=(10, 4), constrained_layout=True)
    axes = fig.subplots(1, 2)
    for kind in kinds:
        rows = cost_table(tuple((image, patch) for image in images), attention=kind, **sizes)
        axes[0].loglog(images, [r.attention_memory for r in rows], marker="o", label=kind)
        axes[1].loglog(images, [r.flops for r in rows], marker="o", label=kind)
    for ax, what in zip(axes, ("attention memory per layer (bytes)", "forward FLOPs (time at a fixed rate)")):
        ax.set_xticks(images, [str(side) for side in images], rotation=45)
        ax.minorticks_off()
        ax.set_xlabel(f"image side (pixels; patch {patch}, N = (side / {patch})^2 tokens)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    return fig
