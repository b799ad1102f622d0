"""The token-count cost model: why the number of patches, not the image size, is the price.

For an image cut into ``N`` tokens of width ``D`` (``H`` heads of ``d = D / H``), one ViT
layer costs, in forward multiply-adds (FLOPs count each as 2)::

    qkv        N x D x 3D          proj   N x D x D
    scores     H x N x N x d       mlp    2 x N x D x hidden
    weights@V  H x N x N x d

and full attention stores ``H x N x N`` scores per image per layer. Everything except the
scores and ``weights @ V`` is linear in ``N``; those two are what attention variants change.
Each kind of attention is one function returning an :class:`AttentionCost`, looked up by name in
:data:`ATTENTION_COSTS`, so a table can grow a column per kind.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..ops.patches import num_tokens

BYTES_FP32 = 4


@dataclass(frozen=True)
class AttentionCost:
    """The token-mixing part of one attention layer.

    Attributes:
        entries: attention scores per head for one image (``N * N`` for full attention).
        score_flops: FLOPs forming the scores for the whole batch, all heads.
        value_flops: FLOPs applying the weights to the values (``weights @ V``), batch and heads.
        memory: bytes of the scores ``(B, H, entries)`` at ``bytes_per_entry``.
    """
    entries: int
    score_flops: int
    value_flops: int
    memory: int


def full_attention(tokens: int, dim: int, heads: int, batch: int = 1,
                   bytes_per_entry: int = BYTES_FP32) -> AttentionCost:
    """Every token attends to every token: scores ``(B, H, N, N)``, ``2 B H N^2 d`` FLOPs each way."""
    entries = tokens * tokens
    flops = 2 * batch * entries * dim                       # H heads x d = D
    return AttentionCost(entries, flops, flops, batch * heads * entries * bytes_per_entry)


ATTENTION_COSTS: dict[str, Callable[..., AttentionCost]] = {"full": full_attention}


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

    def __post_init__(self) -> None:
        for name in ("image", "patch", "dim", "depth", "heads", "batch", "in_chans"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}: choose a head count "
                             f"that divides it")

    @property
    def patches(self) -> int:
        """Patch tokens ``N = (image / patch)^2``; raises if the patch does not divide the image."""
        return num_tokens(self.image, self.image, self.patch)

    @property
    def tokens(self) -> int:
        """Sequence length: patch tokens plus the class token if there is one."""
        return self.patches + int(self.class_token)

    @property
    def hidden(self) -> int:
        """MLP hidden width, as the model builds it: ``int(dim * mlp_ratio)``."""
        return int(self.dim * self.mlp_ratio)


def attention_cost(work: Workload, attention: str = "full") -> AttentionCost:
    """Cost of one layer's token mixing under the named kind of attention."""
    if attention not in ATTENTION_COSTS:
        raise ValueError(f"unknown attention {attention!r}; choose one of {', '.join(ATTENTION_COSTS)}")
    return ATTENTION_COSTS[attention](work.tokens, work.dim, work.heads, work.batch)


def flops(work: Workload, attention: str = "full") -> dict[str, int]:
    """Forward FLOPs (2 per multiply-add) by part, summed over layers, and their ``total``.

    Counts the matrix products only (patch embedding, qkv, scores, weights@V, proj, MLP); norms,
    softmax, GELU, biases and the classifier head are left out.
    """
    b, n, d = work.batch, work.tokens, work.dim
    mix = attention_cost(work, attention)
    parts = {
        "patch_embed": 2 * b * work.patches * work.patch ** 2 * work.in_chans * d,
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


def cost_table(pairs: tuple[tuple[int, int], ...] = TEXTBOOK_PAIRS, attention: str = "full",
               **sizes: Any) -> list[CostRow]:
    """One :class:`CostRow` per ``(image, patch)`` pair; ``sizes`` are :class:`Workload` fields
    (``dim``, ``depth``, ``heads``, ``mlp_ratio``, ``batch``, ``class_token``, ``in_chans``)."""
    if not pairs:
        raise ValueError("no (image, patch) pairs to price: pass at least one, e.g. ((224, 16),)")
    works = [Workload(image=image, patch=patch, **sizes) for image, patch in pairs]
    mixes = [attention_cost(work, attention) for work in works]
    return [CostRow(work.image, work.patch, work.tokens, mix.entries, mix.entries / mixes[0].entries,
                    flops(work, attention)["total"], mix.memory)
            for work, mix in zip(works, mixes)]
