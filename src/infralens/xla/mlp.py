"""The GPT MLP in JAX, with the same weights as :class:`infralens.models.gpt.MLP`.

``mlp(params, x)`` is ``gelu_tanh(x @ w_fc + b_fc) @ w_proj + b_proj`` on a plain dict of
arrays (a pytree), so ``jax.jit``, ``jax.grad`` and the sharding of :mod:`infralens.xla.spmd`
apply to it unchanged. :func:`compare_frameworks` times it under ``jit`` on a GPU against the
PyTorch module run eagerly and under ``torch.compile``, from one set of weights.
"""

from __future__ import annotations

__all__ = ["compare_frameworks", "from_torch", "init_mlp", "mlp", "mlp_flops"]


# [xla:mlp]
def init_mlp(key, d_model: int, d_ff: int, dtype=None, bias: bool = True) -> dict:
    """Weights like GPT-2's (normal, std 0.02; zero biases), as a pytree of arrays."""
    import jax
    import jax.numpy as jnp

    dtype = dtype or jnp.float32
    k_fc, k_proj = jax.random.split(key)  # one key per weight: never reuse a key
    params = {"fc": {"w": 0.02 * jax.random.normal(k_fc, (d_model, d_ff), dtype)},
              "proj": {"w": 0.02 * jax.random.normal(k_proj, (d_ff, d_model), dtype)}}
    if bias:
        params["fc"]["b"] = jnp.zeros((d_ff,), dtype)
        params["proj"]["b"] = jnp.zeros((d_model,), dtype)
    return params


def mlp(params: dict, x):
    """(..., d_model) -> (..., d_model): a pure function of its arguments."""
    import jax

    h = x @ params["fc"]["w"]
    if "b" in params["fc"]:
        h = h + params["fc"]["b"]
    y = jax.nn.gelu(h, approximate=True) @ params["proj"]["w"]
    if "b" in params["proj"]:
        y = y + params["proj"]["b"]
    return y
# [/xla:mlp]


def mlp_flops(tokens: int, d_model: int, d_ff: int) -> int:
    """Matmul FLOPs of one forward pass: two GEMMs of ``tokens x d_model x d_ff``."""
    if min(tokens, d_model, d_ff) < 1:
        raise ValueError("tokens, d_model and d_ff must be positive")
    return 2 * 2 * tokens * d_model * d_ff


def from_torch(module) -> dict:
    """The JAX pytree of a PyTorch GPT ``MLP`` (``nn.Linear`` stores ``(out, in)``: transpose)."""
    import jax.numpy as jnp

    def array(t):
        return jnp.asarray(t.detach().float().cpu().numpy()).astype(_jax_dtype(t.dtype))

    params = {"fc": {"w": array(module.fc.weight.T)}, "proj": {"w": array(module.proj.weight.T)}}
    if module.fc.bias is not None:
        params["fc"]["b"] = array(module.fc.bias)
        params["proj"]["b"] = array(module.proj.bias)
    return params


def _jax_dtype(torch_dtype):
    import jax.numpy as jnp
    import torch

    return {torch.float32: jnp.float32, torch.bfloat16: jnp.bfloat16,
            torch.float16: jnp.float16, torch.float64: jnp.float64}[torch_dtype]


def compare_frameworks(tokens: int = 8192, d_model: int = 4096, d_ff: int | None = None,
                       dtype: str = "bfloat16", seed: int = 0) -> dict:
    """Time one MLP forward on the GPU: JAX ``jit``, PyTorch eager, ``torch.compile``.

    All three use the same weights and input and are checked against each other first. Timing is
    :func:`infralens.tools.bench.bench_host` (launches back to back, one wait per sample), because
    JAX runs on its own CUDA stream, which CUDA events on PyTorch's stream do not see.
    """
    import jax
    import jax.numpy as jnp
    import torch

    from infralens.models.gpt import MLP, GPTConfig
    from infralens.tools.bench import bench_host

    d_ff = d_ff or 4 * d_model
    tdtype = getattr(torch, dtype)
    cuda, gpu = torch.device("cuda", 0), jax.devices("gpu")[0]  # one GPU for both frameworks
    torch.manual_seed(seed)
    cfg = GPTConfig(d_model=d_model, n_heads=1, d_ff=d_ff)
    module = MLP(cfg).to(cuda, tdtype).eval()
    x_t = torch.randn(tokens, d_model, device=cuda, dtype=tdtype)
    params = jax.device_put(from_torch(module), gpu)
    x_j = jax.device_put(jnp.asarray(x_t.float().cpu().numpy()).astype(_jax_dtype(tdtype)), gpu)
    jitted = jax.jit(mlp)
    compiled = torch.compile(module)

    def torch_wait(_):
        torch.cuda.synchronize(cuda)

    with torch.no_grad():
        ref = module(x_t).float()
        outs = {"torch eager": ref, "torch.compile": compiled(x_t).float(),
                "jax jit": torch.from_numpy(jax.device_get(jitted(params, x_j)).astype("float32"))
                .to(cuda)}
        scale = float(ref.abs().max())
        agree = {k: float((v - ref).abs().max()) / scale for k, v in outs.items()}
        times = {"jax jit": bench_host(lambda: jitted(params, x_j), jax.block_until_ready),
                 "torch eager": bench_host(lambda: module(x_t), torch_wait),
                 "torch.compile": bench_host(lambda: compiled(x_t), torch_wait)}
    flops = mlp_flops(tokens, d_model, d_ff)
    for t in times.values():
        t["flops_per_s"] = flops / (t["ms"] / 1e3)
    lowered = jitted.lower(params, x_j).compile().as_text()
    return {"tokens": tokens, "d_model": d_model, "d_ff": d_ff, "dtype": dtype, "flops": flops,
            "max_rel_diff": agree, "times": times, "optimized_hlo": lowered,
            "versions": {"jax": jax.__version__, "torch": torch.__version__}}
