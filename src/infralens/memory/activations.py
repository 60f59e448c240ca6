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

from infralens.memory.report import Breakdown
from infralens.models.config import ConfigLike, as_shape
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


# --- a Llama layer ---------------------------------------------------------------------------------

NormSaves: TypeAlias = Literal["fused", "eager"]
SwigluSaves: TypeAlias = Literal["eager", "fused"]


@dataclass(frozen=True)
class LlamaLayerActivations(Breakdown):
    """Bytes one Llama-style layer saves for backward, by block (see
    :func:`llama_activation_bytes_per_layer`). ``statistics`` are the per-row terms."""

    attention: int
    mlp: int
    norms: int
    statistics: int
    sbh: int  # s x b x h, the unit of the coefficient

    LINES = (("attention", "attention"), ("MLP", "mlp"), ("RMSNorms", "norms"),
             ("per-row statistics (fp32)", "statistics"))

    @property
    def activations(self) -> int:
        """The terms that grow with ``s·b`` times a width: attention + MLP + norms, all but the
        per-row statistics."""
        return self.total - self.statistics

    @property
    def coefficient(self) -> float:
        """``activations / sbh``: the number that replaces Korthikanti's 34 for this layer."""
        return self.activations / self.sbh


def llama_activation_bytes_per_layer(
    config: ConfigLike,
    s: int,
    b: int,
    norm: NormSaves = "fused",
    swiglu: SwigluSaves = "eager",
) -> LlamaLayerActivations:
    """What one Llama-style layer saves for backward in 16-bit training, tensor by tensor.

    The layer is ``x = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))`` then
    ``x = x + down(silu(gate(n2(x))) * up(n2(x)))``, with RMSNorms ``n1``, ``n2``, ``a``
    query heads and ``a_kv`` key/value heads of width ``d_h``, and MLP width ``d_ff``. Every
    activation is 16-bit (``e = 2`` bytes: a bf16 model, not autocast). Counting, as
    Korthikanti et al. do for the GPT layer, the inputs each backward needs:

    * **Attention.** The Q/K/V projections share one input, ``e·sbh``. A fused attention
      kernel (FlashAttention, PyTorch's SDPA kernels) saves ``Q`` (``e·s·b·a·d_h``), ``K`` and
      ``V`` at their *GQA* width (``2e·s·b·a_kv·d_h``; ``repeat_kv`` before the kernel would
      save them at full width), its output, which is also the output projection's input
      (``e·s·b·a·d_h``), and one fp32 log-sum-exp per head and token. RoPE multiplies by
      constant cos/sin tables and saves only those tables (``s·d_h``, shared by all layers).
      No ``s²`` term: the kernel stores no scores. With ``a·d_h = h``:
      ``e·sbh·(3 + 2·a_kv/a)``.
    * **SwiGLU.** The gate and up projections share one input, ``e·sbh``. As written in eager
      PyTorch (Hugging Face's and Meta's Llama code), ``silu`` saves its input (the gate output),
      the product saves both factors (the SiLU output and the up output), and the down
      projection saves the product: four ``d_ff``-wide tensors. A fused SiLU·mul kernel saves
      the gate and up outputs and recomputes the SiLU in backward, and the down projection
      still saves the product: three. ``e·sbh·(1 + n·d_ff/h)`` with ``n`` = 4 or 3.
    * **RMSNorm** (two per layer). A fused kernel saves its 16-bit input and one 1/rms per
      token: ``e·sbh``. Hugging Face's ``LlamaRMSNorm`` in a 16-bit model upcasts to fp32
      first, so ``pow`` and the multiply by 1/rms save the fp32 copy (``4·sbh``), and the
      multiply by the gain saves the normalized 16-bit tensor (``e·sbh``), plus an fp32 1/rms
      per token.
    * No dropout (Llama trains without it), so no masks.

    For ``a·d_h = h`` the coefficient is ``2·(3 + 2a_kv/a) + 2·(1 + n·d_ff/h) + N`` with
    ``N = 4`` (fused norms) or ``12`` (eager): for Llama-3-8B (``a/a_kv = 4``,
    ``d_ff/h = 3.5``, eager SwiGLU, fused norms) ``7 + 30 + 4 = 41``, against the 34 of the
    GPT layer. The per-row statistics are fp32: two 1/rms per token and ``a`` log-sum-exps.

    Args:
        config: the model (a ModelShape, a config dict or a path); its norm must be RMSNorm
            and its MLP SwiGLU.
        s: sequence length. b: micro-batch size.
        norm: ``"fused"`` (a fused RMSNorm kernel) or ``"eager"`` (Hugging Face's module).
        swiglu: ``"eager"`` (four saved ``d_ff``-wide tensors) or ``"fused"`` (three).

    Raises:
        ValueError: a non-positive size, an unknown option, or a model that is not a
            Llama-style (RMSNorm, SwiGLU, dense) layer.
    """
    require_positive(s=s, b=b)
    if norm not in ("fused", "eager"):
        raise ValueError(f"norm must be 'fused' or 'eager'; got {norm!r}")
    if swiglu not in ("eager", "fused"):
        raise ValueError(f"swiglu must be 'eager' or 'fused'; got {swiglu!r}")
    shape = as_shape(config)
    if shape.norm != "rmsnorm" or shape.mlp != "swiglu" or shape.is_moe:
        raise ValueError(f"a Llama-style layer has RMSNorm and a dense SwiGLU MLP; "
                         f"{shape.family} has {shape.norm} and a {shape.mlp} MLP"
                         + (" with experts" if shape.is_moe else ""))
    # [memory:llama-activations]
    e, tokens = 2, s * b  # 16-bit activations; every term is per token
    h, ff = shape.d_model, shape.d_ff
    q, kv = shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim  # widths of Q; of K, V
    attention = e * tokens * (h + q + 2 * kv + q)  # QKV input; Q; K, V at GQA width; output
    ff_saved = 4 if swiglu == "eager" else 3  # gate out, SiLU out, up out, product (fused: no SiLU out)
    mlp = e * tokens * (h + ff_saved * ff)  # gate/up input; the d_ff-wide tensors
    one_norm = e * tokens * h if norm == "fused" else (4 + e) * tokens * h  # eager: fp32 copy + x̂
    norms = 2 * one_norm
    statistics = 4 * tokens * (2 + shape.n_heads)  # fp32: 1/rms of two norms; log-sum-exp per head
    # [/memory:llama-activations]
    return LlamaLayerActivations(attention=attention, mlp=mlp, norms=norms, statistics=statistics,
                                 sbh=tokens * h)
