"""HBM traffic of the memory-bound work around one decoder layer's matmuls, unfused and fused.

The elementwise and normalization work of a Llama-style layer (two RMSNorms, two residual adds,
SwiGLU's ``silu(gate) * up``) does almost no arithmetic: its time is the bytes it moves over the
HBM bandwidth. :func:`layer_traffic` counts those bytes for ``tokens`` tokens two ways. Unfused:
each op as eager PyTorch runs it, every intermediate written to HBM and read back (the counts of
:func:`~infralens.kernels.triton_rmsnorm.eager_rmsnorm_traffic`, and the residual count of
:func:`~infralens.kernels.fused_linear.epilogue_bytes` without bias and GELU). Fused: RMSNorm as
one kernel, each residual add in the epilogue of the matmul before it, ``silu(gate) * up`` in the
epilogue of one gate-and-up matmul. :func:`layer_matmul_flops` gives the same layer's matmul work, for scale.
RoPE and the attention kernel itself are left out (FlashAttention is already fused).
"""

from __future__ import annotations

from infralens.kernels.triton_rmsnorm import eager_rmsnorm_traffic, rmsnorm_bytes
from infralens.memory.params import attention_params_per_layer
from infralens.models import ConfigLike, as_shape
from infralens.transformer.flops import active_mlp_params_per_layer

__all__ = ["swiglu_bytes", "layer_traffic", "layer_matmul_flops"]


def swiglu_bytes(tokens: int, d_ff: int, elem_bytes: int) -> dict[str, int]:
    """``silu(gate) * up`` on (tokens, d_ff): unfused, the two matmuls write gate and up, ``silu``
    reads gate and writes s, the product reads s and up and writes u (7 tensors); fused into the
    epilogue of one matmul over stacked gate and up weights, only u is written (1 tensor)."""
    t = tokens * d_ff * elem_bytes
    return {"unfused": 2 * t + 2 * t + 3 * t, "fused": t}


# [traffic:layer]
def layer_traffic(config: ConfigLike, tokens: int, elem_bytes: int = 2) -> list[dict]:
    """HBM bytes of the memory-bound ops of one layer over ``tokens`` tokens, unfused and fused."""
    m = as_shape(config)
    h, f = m.d_model, m.d_ff
    norm = {"unfused": sum(r["read"] + r["write"] for r in eager_rmsnorm_traffic(tokens, h, elem_bytes)),
            "fused": rmsnorm_bytes(tokens, h, elem_bytes, 1)["fwd"]}
    t = tokens * h * elem_bytes  # one (tokens, h) tensor
    # The matmul writes its output, the add reads it and the residual and writes the sum (4 t);
    # in the matmul's epilogue the add reads the residual and writes the sum (2 t).
    add = {"unfused": t + 3 * t, "fused": 2 * t}
    return [{"op": "attention RMSNorm", **norm}, {"op": "residual add after o-projection", **add},
            {"op": "MLP RMSNorm", **norm}, {"op": "silu(gate) * up", **swiglu_bytes(tokens, f, elem_bytes)},
            {"op": "residual add after down-projection", **add}]
# [/traffic:layer]


def layer_matmul_flops(config: ConfigLike, tokens: int) -> int:
    """Multiply-adds of one layer's weight matmuls (q, k, v, o and the MLP) over ``tokens``, x2."""
    m = as_shape(config)
    return 2 * tokens * (attention_params_per_layer(m) + active_mlp_params_per_layer(m))
