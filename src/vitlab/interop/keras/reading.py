"""A Keras ViT read back from its output: the head (``[LN] -> pool -> [LN] -> [Dense]``) and the pre-norm
blocks (``x + MHA(LN(x))``, then ``x + Dense(Dense_gelu(LN(x)))``), into a :class:`Reading`: a vitlab state
dict, config fields and the :class:`Stage` s to check, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointError
from .keras_graph import Graph, kind_of, op_name, op_names
from .keras_layers import read_attention, read_dense, read_norm, self_attention_input
from .keymaps import StateDict

_POOLS = {"GlobalAveragePooling1D": "mean", "GlobalMaxPooling1D": "max"}


@dataclass
class Stage:
    """Keras operations that compute one part of vitlab's ViT (``"input"``: the patch projection's
    input, ``"embedding"``, ``"block i"``, ``"head"``), ending at ``tensor``."""

    part: str
    ops: list[Any]
    tensor: Any


@dataclass
class Reading:
    """What the graph says: a vitlab state dict, config fields, and the stages to check, in order."""

    state: StateDict = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    norms: list[Any] = field(default_factory=list)
    softmax: bool = False


def read_head(graph: Graph, out: Any, reading: Reading) -> Any:
    """``[LN] -> pool -> [LN] -> [Dense]`` back from the output; returns the tensor the head reads."""
    ops, state, tensor = [], reading.state, out
    op, node = graph.producer(tensor)
    if kind_of(op) == "Dense":
        state["head.weight"], state["head.bias"] = read_dense(op, ("softmax", "linear"))
        reading.softmax = op.activation.__name__ == "softmax"
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    fc_norm = kind_of(op) == "LayerNormalization"
    if fc_norm:
        state["fc_norm.weight"], state["fc_norm.bias"] = read_norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    cfg = op.get_config() if kind_of(op) in _POOLS else {}
    if cfg.get("data_format") != "channels_last" or cfg.get("keepdims"):
        raise CheckpointError(
            f"layer {op_name(op)} where the ViT pools its tokens: vitlab places GlobalAveragePooling1D "
            f"or GlobalMaxPooling1D (channels_last, keepdims=False) before the optional head Dense"
        )
    pool = _POOLS[kind_of(op)]
    ops.append(op)
    tensor = node.input_tensors[0]
    op, node = graph.producer(tensor)
    final_norm = kind_of(op) == "LayerNormalization"
    if final_norm and fc_norm:
        raise CheckpointError(
            f"LayerNormalizations {op.name!r} before the pooling and {ops[-2].name!r} after it: "
            f"vitlab's ViT normalises once, before pooling (final norm) or after it (fc_norm)"
        )
    if final_norm:
        state["norm.weight"], state["norm.bias"] = read_norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
    reading.fields.update(
        pool=pool,
        final_norm=final_norm or fc_norm,
        fc_norm=fc_norm,
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
    )
    reading.stages.append(Stage("head", ops[::-1], out))
    return tensor


def _read_branch(graph: Graph, stream: Any, branch: Any, add: Any) -> tuple[str, list[Any]]:
    """The layers of ``branch(stream)``, in order, as ``"attention"`` (LN -> MHA) or ``"mlp"``
    (LN -> Dense -> Dense)."""
    ops, tensor, start = [], branch, graph.skip(stream)
    while graph.skip(tensor) is not start:
        op, node = graph.producer(tensor)
        kind = kind_of(op)
        if kind == "MultiHeadAttention":
            tensor = self_attention_input(op, node)
        elif kind in ("LayerNormalization", "Dense"):
            tensor = node.input_tensors[0]
        else:
            raise CheckpointError(
                f"layer {op_name(op)} in the residual branch added by {add.name!r}: vitlab's blocks "
                f"add LayerNormalization -> MultiHeadAttention and LayerNormalization -> Dense -> "
                f"Dense"
            )
        ops.append(op)
    ops.reverse()
    kinds = [kind_of(op) for op in ops]
    if kinds == ["LayerNormalization", "MultiHeadAttention"]:
        return "attention", ops
    if kinds == ["LayerNormalization", "Dense", "Dense"]:
        return "mlp", ops
    raise CheckpointError(
        f"the residual branch {' -> '.join(kinds) or 'identity'} added by {add.name!r} is neither of "
        f"vitlab's: LayerNormalization -> MultiHeadAttention, LayerNormalization -> Dense -> Dense"
    )


def read_blocks(graph: Graph, tensor: Any, reading: Reading) -> Any:
    """Pre-norm blocks back from ``tensor``; returns the tensor that enters the first block."""
    units = []
    while (found := graph.residual(tensor)) is not None:
        stream, branch, add = found
        units.append((*_read_branch(graph, stream, branch, add), add, tensor))
        tensor = stream
    units.reverse()
    if not units:
        raise CheckpointError(
            f"layer {op_name(graph.producer(tensor)[0])} where the last block's residual Add should "
            f"be: vitlab's blocks are x + MultiHeadAttention(LayerNormalization(x)), then "
            f"x + Dense(Dense(LayerNormalization(x))) (a custom block layer is code vitlab cannot "
            f"read)"
        )
    dim, state, stages = tensor.shape[-1], reading.state, []
    heads, biases, hidden = set(), set(), set()
    for b in range((len(units) + 1) // 2):
        pair = units[2 * b : 2 * b + 2]
        if [kind for kind, *_ in pair] != ["attention", "mlp"]:
            layers = [op for _, ops, add, _ in pair for op in [*ops, add]]
            raise CheckpointError(
                f"the residual branches {op_names(layers)} do not form a block: vitlab's blocks add "
                f"an attention branch, then an MLP branch"
            )
        (_, (ln1, mha), add1, _), (_, (ln2, fc1, fc2), add2, out) = pair
        h, bias, weights = read_attention(mha, dim)
        heads.add(h)
        biases.add(bias)
        state.update({f"blocks.{b}.{k}": v for k, v in weights.items()})
        state[f"blocks.{b}.norm1.weight"], state[f"blocks.{b}.norm1.bias"] = read_norm(ln1)
        state[f"blocks.{b}.norm2.weight"], state[f"blocks.{b}.norm2.bias"] = read_norm(ln2)
        state[f"blocks.{b}.mlp.fc1.weight"], state[f"blocks.{b}.mlp.fc1.bias"] = read_dense(fc1, ("gelu",))
        state[f"blocks.{b}.mlp.fc2.weight"], state[f"blocks.{b}.mlp.fc2.bias"] = read_dense(fc2, ("linear",))
        hidden.add(state[f"blocks.{b}.mlp.fc1.weight"].shape[0])
        reading.norms += [ln1, ln2]
        stages.append(Stage(f"block {b}", [ln1, mha, add1, ln2, fc1, fc2, add2], out))
    if len(heads) > 1 or len(biases) > 1 or len(hidden) > 1:
        raise CheckpointError(
            f"blocks with different head counts {sorted(heads)}, attention biases or MLP widths "
            f"{sorted(hidden)}: vitlab's blocks are all alike"
        )
    reading.stages[:0] = stages
    reading.fields.update(depth=len(stages), num_heads=heads.pop(), qkv_bias=biases.pop(), mlp_ratio=hidden.pop() / dim)
    return tensor
