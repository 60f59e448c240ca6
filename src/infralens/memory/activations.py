"""Activation memory of one transformer layer during training (Korthikanti et al., 2022).

Backpropagation needs, for every operation, the inputs it saw in the forward pass. Those
saved tensors are the *activations*, and for long sequences they dwarf the weights.
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
count them for a GPT-style layer in 16-bit precision (2 bytes per element, 1 byte per
dropout-mask element). With sequence length ``s``, micro-batch ``b``, hidden size ``h``,
``a`` attention heads and tensor-parallel size ``t``, their Table 2 reads (bytes per layer):

=====================================================  ==========================
no parallelism                                         sbh(34 + 5as/h)
tensor parallel                                        sbh(10 + 24/t + 5as/(ht))
tensor + sequence parallel                             sbh(34/t + 5as/(ht))
tensor parallel + selective recompute                  sbh(10 + 24/t)
tensor + sequence parallel + selective recompute       sbh(34/t)
full recompute                                         2sbh
=====================================================  ==========================

Where the numbers come from (:data:`ACTIVATION_TERMS` lists every tensor):

* ``34`` = 11 (attention) + 19 (MLP) + 4 (two LayerNorms), each in units of ``sbh`` bytes.
  Tensor parallelism splits 24 of them across ``t`` GPUs; the other 10 (LayerNorm inputs,
  the inputs of the first linear layers, the dropout masks) stay whole on every GPU until
  sequence parallelism splits them along the sequence.
* ``5as/h`` is the ``5as²b`` bytes of the attention scores (softmax output, its dropout mask
  and dropout output: ``a`` heads x ``s`` x ``s`` each). It grows with ``s²``; *selective*
  recompute drops exactly these and recomputes them in the backward pass.

The model is the paper's: multi-head attention, a GELU MLP of width ``4h``, dropout, and
attention that materializes its ``s x s`` scores. FlashAttention never stores the scores,
which has the same effect on memory as selective recompute; SwiGLU MLPs and GQA change the
19 and the 11. Everything is exact integer arithmetic: ``sbh·5as/h`` is ``5·a·s²·b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from infralens.tools.checks import require_positive

Recompute: TypeAlias = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


def activation_bytes_per_layer(
    s: int,
    b: int,
    h: int,
    a: int,
    t: int = 1,
    sequence_parallel: bool = False,
    recompute: Recompute = "none",
) -> int:
    """Bytes of activations one transformer layer keeps for backward (Table 2 of the paper).

    Args:
        s: sequence length. b: micro-batch size. h: hidden size. a: attention heads.
        t: tensor-parallel size; the result is per GPU. Must divide ``a`` and ``h``.
        sequence_parallel: also split the non-tensor-parallel regions (LayerNorms, dropouts)
            along the sequence. Requires ``t`` to divide ``s``.
        recompute: ``"none"``; ``"selective"`` (recompute the attention scores);
            ``"full"`` (keep only the layer's input and recompute the whole layer).

    Full recompute keeps just the layer's 16-bit input, ``2sbh``: the value Table 2 gives.
    With sequence parallelism that input is itself split along the sequence (it is the
    residual stream between layers, which sequence parallelism shards), so each GPU keeps
    ``2sbh/t``; the paper's table lists full recompute without that refinement, and
    Megatron-LM stores the sharded tensor. Without sequence parallelism we return ``2sbh``.

    Raises:
        ValueError: a non-positive size, ``t`` not dividing ``a``, ``h`` (or ``s`` with
            sequence parallelism), or an unknown ``recompute``.
    """
    require_positive(s=s, b=b, h=h, a=a, t=t)
    if recompute not in RECOMPUTE_MODES:
        modes = ", ".join(RECOMPUTE_MODES)
        raise ValueError(f"recompute must be one of {modes}; got {recompute!r}")
    if a % t or h % t:
        raise ValueError(f"tensor-parallel size t={t} must divide heads a={a} and hidden h={h}")
    if sequence_parallel and s % t:
        raise ValueError(f"sequence parallelism needs t={t} to divide the sequence length s={s}")
    # [memory:activations]
    sbh = s * b * h
    scores = 5 * a * s * s * b // t  # softmax out, dropout mask, dropout out: a x s x s each
    if recompute == "full":  # keep only the layer input; recompute everything in backward
        return 2 * sbh // t if sequence_parallel else 2 * sbh
    if sequence_parallel:
        linear = 34 * sbh // t  # every s·b·h-sized tensor is split, 24 by TP and 10 along s
    else:
        linear = 10 * sbh + 24 * sbh // t  # 10 stay whole on every GPU, 24 are split by TP
    if recompute == "selective":
        return linear  # the attention scores are recomputed, not stored
    return linear + scores
    # [/memory:activations]


@dataclass(frozen=True)
class ActivationTerm:
    """One saved tensor of a layer, as ``sbh_bytes·s·b·h + as2b_bytes·a·s²·b`` bytes.

    ``split_by_tp`` is True for tensors tensor parallelism shards across ``t`` GPUs and
    False for the ones it leaves whole (those are what sequence parallelism splits).
    """

    block: str
    tensor: str
    sbh_bytes: int
    as2b_bytes: int
    split_by_tp: bool

    def bytes(self, s: int, b: int, h: int, a: int) -> int:
        """Bytes of this tensor without any parallelism or recompute."""
        return self.sbh_bytes * s * b * h + self.as2b_bytes * a * s * s * b


def _block(block: str, *tensors: tuple[str, int, int, bool]) -> tuple[ActivationTerm, ...]:
    """The saved tensors of one block of the layer, each ``(tensor, sbh_bytes, as2b_bytes,
    split_by_tp)``."""
    return tuple(ActivationTerm(block, *tensor) for tensor in tensors)


#: The tensors behind ``34`` and ``5as/h``: 16-bit tensors cost 2 bytes per element, dropout
#: masks 1 byte. Widths are in units of h (the MLP's hidden layer is 4h wide: 2 bytes x 4).
#: Attention saves 11 sbh and 5 as²b, the MLP 19 sbh, the two LayerNorms 4 sbh.
ACTIVATION_TERMS: tuple[ActivationTerm, ...] = (
    *_block(
        "attention",  # tensor, sbh bytes, as²b bytes, split by tensor parallelism
        ("input of the Q/K/V projection", 2, 0, False),
        ("Q and K, inputs of QK^T", 4, 0, True),
        ("softmax output", 0, 2, True),
        ("attention-dropout mask", 0, 1, True),
        ("attention-dropout output, input of x V", 0, 2, True),
        ("V, input of x V", 2, 0, True),
        ("input of the output projection", 2, 0, True),
        ("residual-dropout mask", 1, 0, False),
    ),
    *_block(
        "mlp",
        ("input of the first linear layer", 2, 0, False),
        ("GELU input (4h wide)", 8, 0, True),
        ("input of the second linear layer (4h wide)", 8, 0, True),
        ("residual-dropout mask", 1, 0, False),
    ),
    *_block("layernorm", ("inputs of the two LayerNorms", 4, 0, False)),
)


def activation_breakdown(s: int, b: int, h: int, a: int) -> tuple[tuple[str, str, int], ...]:
    """``(block, tensor, bytes)`` for every saved tensor of one layer, no parallelism.

    The bytes add up to ``activation_bytes_per_layer(s, b, h, a)``.
    """
    require_positive(s=s, b=b, h=h, a=a)
    return tuple((term.block, term.tensor, term.bytes(s, b, h, a)) for term in ACTIVATION_TERMS)
