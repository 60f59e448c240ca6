"""RMSNorm as a Pallas kernel: one program normalizes a block of rows, read once, written once.

Pallas is JAX's kernel language: a kernel reads and writes *refs* (blocks of its operands that
``BlockSpec``s carve out for each program of a grid) with NumPy-style indexing, and
``pl.pallas_call`` lowers it for the backend (Triton or Mosaic GPU on NVIDIA GPUs, the default
depending on the JAX version; Mosaic on TPUs) or runs it in
Python with ``interpret=True``, which is how the CPU build executes it.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

__all__ = ["rmsnorm", "rmsnorm_reference", "compare_rmsnorm"]


# [pallas:rmsnorm]
def _rmsnorm_kernel(x_ref, w_ref, o_ref, *, eps: float):
    x = x_ref[...].astype(jnp.float32)          # (block_rows, d): this program's rows, in registers
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + eps)  # one scale per row
    o_ref[...] = (x * inv * w_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def rmsnorm(x, w, eps: float = 1e-6, block_rows: int = 8, interpret: bool = False):
    """``x / sqrt(mean(x^2) + eps) * w`` over the last axis of a 2-D ``x`` (rows, d)."""
    rows, d = x.shape
    if w.shape != (d,):
        raise ValueError(f"w has shape {w.shape}, expected ({d},)")
    if block_rows < 1 or rows % block_rows:
        raise ValueError(f"block_rows={block_rows} must divide the {rows} rows")
    return pl.pallas_call(
        functools.partial(_rmsnorm_kernel, eps=eps),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // block_rows,),                                   # one program per block
        in_specs=[pl.BlockSpec((block_rows, d), lambda i: (i, 0)),    # program i: rows of block i
                  pl.BlockSpec((d,), lambda i: (0,))],                # every program: all of w
        out_specs=pl.BlockSpec((block_rows, d), lambda i: (i, 0)),
        interpret=interpret,
    )(x, w)
# [/pallas:rmsnorm]


def rmsnorm_reference(x, w, eps: float = 1e-6):
    """The same function in jax.numpy (float32 arithmetic), for XLA to fuse on its own."""
    xf = x.astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (xf * inv * w.astype(jnp.float32)).astype(x.dtype)


def compare_rmsnorm(rows: int = 16384, d: int = 4096, dtype: str = "bfloat16",
                    block_rows: int = 8, seed: int = 0) -> dict:
    """On the GPU: the Pallas kernel against the jitted jnp reference and a device copy.

    Returns the largest difference between the two, the spacing of ``dtype`` at the largest
    output value (one unit in the last place there) and, for each, milliseconds and bytes per
    second counting one read of ``x`` and ``w`` and one write of the output.
    Timing: :func:`infralens.tools.bench.bench_host`.
    """
    from infralens.tools.bench import bench_host

    key_x, key_w = jax.random.split(jax.random.key(seed))
    jdtype = getattr(jnp, dtype)
    x = jax.random.normal(key_x, (rows, d), jnp.float32).astype(jdtype)
    w = (1.0 + 0.1 * jax.random.normal(key_w, (d,), jnp.float32)).astype(jdtype)
    pallas = jax.jit(lambda a, b: rmsnorm(a, b, block_rows=block_rows))
    reference = jax.jit(rmsnorm_reference)
    copy = jax.jit(lambda a: a + jnp.zeros((), a.dtype))  # read x, write a new array
    out_p = pallas(x, w).astype(jnp.float32)
    out_r = reference(x, w).astype(jnp.float32)
    spacing = float(jnp.spacing(jnp.abs(out_r).max().astype(jdtype)))  # one ulp at the largest output
    nbytes = 2 * x.size * x.dtype.itemsize + w.size * w.dtype.itemsize
    lowered = pallas.lower(x, w).as_text()  # which backend compiled the kernel: its custom call
    targets = sorted({a or b for a, b in re.findall(r'custom_call @([\w$.]+)|call_target_name = "([^"]+)"',
                                                    lowered)})
    results = {"rows": rows, "d": d, "dtype": dtype, "block_rows": block_rows,
               "max_abs_diff": float(jnp.abs(out_p - out_r).max()), "spacing_at_max": spacing,
               "bytes": nbytes, "jax": jax.__version__, "custom_calls": targets}
    for name, fn in (("pallas", lambda: pallas(x, w)), ("jnp reference", lambda: reference(x, w)),
                     ("copy", lambda: copy(x))):
        t = bench_host(fn, jax.block_until_ready)
        moved = 2 * x.size * x.dtype.itemsize if name == "copy" else nbytes
        t["bytes_per_s"] = moved / (t["ms"] / 1e3)
        results[name] = t
    return results
