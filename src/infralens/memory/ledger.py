"""Memory ledgers: what training and inference must keep resident, line by line.

Training keeps, for every parameter, the weight, its gradient and the optimizer's state, and
for every layer, the activations saved for backward. Inference keeps the weights and the KV
cache. Those are the lines of the two ledgers below, each a plain sum of exact byte counts.

Bytes per parameter in the training ledger (``Ψ`` parameters):

==============  ========  ==========  ==============  ================  ======================
precision       weights   gradients   master weights  optimizer states  total (SGD/mom./Adam)
==============  ========  ==========  ==============  ================  ======================
``fp32``        4         4           0               0 / 4 / 8         8 / 12 / 16
``mixed``       2         2           4               0 / 4 / 8         8 / 12 / 16
``amp``         4         4           0               0 / 4 / 8         8 / 12 / 16
==============  ========  ==========  ==============  ================  ======================

``mixed`` is the recipe of the ZeRO paper (Rajbhandari et al., 2020): 16-bit weights and
gradients for the forward and backward passes, plus an fp32 master copy of the weights that
the optimizer updates. With Adam that is ``2Ψ + 2Ψ + KΨ`` with ``K = 12`` (master copy,
momentum, variance), 16 bytes per parameter: 120 GB for their 7.5B-parameter example.
``amp`` is ``torch.autocast``: the model stays fp32 and autocast casts weights to 16 bits
on the fly, inside each op. Same 16 bytes per parameter, arranged differently; the bf16
weight copies are not a ledger line, although autograd saves each matmul's copy from the
forward until that layer's backward (see :data:`NOT_IN_LEDGER`).

What the ledgers leave out (:data:`NOT_IN_LEDGER`, so a page can print it): anything the
allocator, the runtime or the framework adds on top of these tensors. Measured peaks are
higher than the ledger; the gap is the subject of the lab's measurement section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from infralens.memory.activations import Recompute, activation_bytes_per_layer
from infralens.memory.kv_cache import kv_cache_bytes
from infralens.memory.params import ParamCount, count_parameters
from infralens.memory.report import Breakdown
from infralens.models.config import ConfigLike, as_shape
from infralens.tools.checks import require_positive

Optimizer: TypeAlias = Literal["sgd", "sgd_momentum", "adamw"]
Precision: TypeAlias = Literal["fp32", "mixed", "amp"]

#: fp32 optimizer state per parameter: none for SGD, a momentum buffer, or Adam's two moments.
OPTIMIZER_STATE_BYTES: dict[str, int] = {"sgd": 0, "sgd_momentum": 4, "adamw": 8}

#: (weights, gradients, master weights) bytes per parameter for each precision recipe.
PRECISION_BYTES: dict[str, tuple[int, int, int]] = {
    "fp32": (4, 4, 0),
    "mixed": (2, 2, 4),  # ZeRO: 16-bit weights and grads, fp32 master weights
    "amp": (4, 4, 0),  # torch.autocast: fp32 weights and grads; bf16 copies not counted here
}

#: Real memory the ledgers do not count, and why. Each entry: (item, explanation).
NOT_IN_LEDGER: tuple[tuple[str, str], ...] = (
    (
        "allocator caching and fragmentation",
        "PyTorch's caching allocator keeps freed blocks reserved and rounds requests up; "
        "memory_reserved() exceeds memory_allocated()",
    ),
    (
        "CUDA context and kernels",
        "the driver context and loaded kernel images: hundreds of MB per process before the "
        "first tensor, outside PyTorch's allocator (cuBLAS/cuDNN workspaces, by contrast, are "
        "allocator tensors and show in memory_allocated)",
    ),
    (
        "communication buffers",
        "DDP gradient buckets and ZeRO/FSDP gather buffers (allocator tensors), and the "
        "communication library's (NCCL's) own buffers, which are outside the allocator",
    ),
    (
        "autocast weight copies",
        "under autocast, each matmul's bf16 copy of its weight is saved by autograd from the "
        "forward until that layer's backward (about 2 bytes per matmul weight), and autocast's "
        "cast cache holds every copy until the autocast region ends, checkpointed layers "
        "included",
    ),
    (
        "temporary buffers",
        "optimizer temporaries (foreach Adam), per-op scratch tensors and cuBLAS/cuDNN "
        "workspaces, all allocator tensors; they set the peak and are freed after each op or "
        "step, except the workspaces, which the libraries keep for reuse",
    ),
    (
        "logits and loss",
        "the b x s x V logits (often fp32) and their gradient; with a 128K vocabulary they "
        "can rival a layer's activations",
    ),
    (
        "embedding and head activations",
        "the activation formula counts transformer layers only",
    ),
)


@dataclass(frozen=True)
class TrainingLedger(Breakdown):
    """Bytes that live across a training step for ``num_params`` parameters."""

    num_params: int
    optimizer: str
    precision: str
    weights: int
    gradients: int
    master_weights: int
    optimizer_states: int

    LINES = (("weights", "weights"), ("gradients", "gradients"),
             ("master weights", "master_weights"), ("optimizer states", "optimizer_states"))

    @property
    def bytes_per_param(self) -> int:
        """Total bytes per parameter (16 for Adam under ``mixed`` or ``amp``)."""
        return self.total // self.num_params


def training_ledger(num_params: int, optimizer: Optimizer, precision: Precision) -> TrainingLedger:
    """Bytes of weights, gradients, master weights and optimizer states (see module table).

    Raises:
        ValueError: ``num_params`` not a positive integer, or an unknown optimizer/precision.
    """
    require_positive(num_params=num_params)
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZER_STATE_BYTES)}; "
                         f"got {optimizer!r}")
    if precision not in PRECISION_BYTES:
        raise ValueError(f"precision must be one of {', '.join(PRECISION_BYTES)}; "
                         f"got {precision!r}")
    # [memory:training-ledger]
    weight_bytes, grad_bytes, master_bytes = PRECISION_BYTES[precision]
    state_bytes = OPTIMIZER_STATE_BYTES[optimizer]  # always fp32, whatever the precision
    return TrainingLedger(
        num_params=num_params,
        optimizer=optimizer,
        precision=precision,
        weights=weight_bytes * num_params,
        gradients=grad_bytes * num_params,
        master_weights=master_bytes * num_params,  # fp32 copy the optimizer updates (mixed)
        optimizer_states=state_bytes * num_params,
    )
    # [/memory:training-ledger]


@dataclass(frozen=True)
class TrainingEstimate:
    """A whole-model training estimate: the parameter ledger plus all layers' activations."""

    params: ParamCount
    ledger: TrainingLedger
    activations: int
    activations_per_layer: int

    @property
    def total(self) -> int:
        return self.ledger.total + self.activations

    def rows(self) -> tuple[tuple[str, int], ...]:
        """The ledger's lines, then activations, then the grand total."""
        return (*self.ledger.rows()[:-1], ("activations", self.activations), ("total", self.total))


def training_estimate(
    config: ConfigLike,
    batch: int,
    seq_len: int,
    optimizer: Optimizer = "adamw",
    precision: Precision = "mixed",
    t: int = 1,
    sequence_parallel: bool = False,
    recompute: Recompute = "none",
) -> TrainingEstimate:
    """Training memory of a model: ``training_ledger`` + ``L x activation_bytes_per_layer``.

    Activations follow Korthikanti et al. with ``h = d_model`` and ``a = n_heads``; their
    count assumes 16-bit activations (``mixed`` or ``amp``), so under ``fp32`` it is an
    underestimate, and it describes a GELU, multi-head layer (see ``activations.py``).
    With ``t > 1`` the activations are per GPU while the ledger is for the whole model.
    """
    shape = as_shape(config)
    params = count_parameters(shape)
    per_layer = activation_bytes_per_layer(
        s=seq_len, b=batch, h=shape.d_model, a=shape.n_heads,
        t=t, sequence_parallel=sequence_parallel, recompute=recompute,
    )
    return TrainingEstimate(
        params=params,
        ledger=training_ledger(params.total, optimizer, precision),
        activations=shape.n_layers * per_layer,
        activations_per_layer=per_layer,
    )


@dataclass(frozen=True)
class InferenceLedger(Breakdown):
    """Bytes resident while serving: the weights and a full-length KV cache."""

    weights: int
    kv_cache: int

    LINES = (("weights", "weights"), ("KV cache", "kv_cache"))


def inference_ledger(
    config: ConfigLike,
    batch: int,
    seq_len: int,
    weight_bytes_per_param: int = 2,
    kv_bytes_per_elem: int = 2,
) -> InferenceLedger:
    """Weights plus the KV cache for ``batch`` sequences of ``seq_len`` tokens each.

    No gradients, no optimizer, no saved activations: inference keeps only what the next
    token needs. Defaults are 16-bit weights and a 16-bit cache.
    """
    require_positive(weight_bytes_per_param=weight_bytes_per_param)
    # [memory:inference-ledger]
    shape = as_shape(config)
    # Every weight, once, at the serving precision (2 bytes for bf16, 1 for fp8 or int8).
    weights = count_parameters(shape).total * weight_bytes_per_param
    # One K and one V vector per KV head, per layer, per sequence, per token (kv_cache.py).
    kv_cache = kv_cache_bytes(shape, batch, seq_len, bytes_per_elem=kv_bytes_per_elem)
    return InferenceLedger(weights=weights, kv_cache=kv_cache)
    # [/memory:inference-ledger]
