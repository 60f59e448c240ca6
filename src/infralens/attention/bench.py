"""The measurements behind the chapter's GPU cells, written so the CPU tests can run them small.

Everything takes a ``timer``: a function that runs a no-argument callable and returns
milliseconds. On the GPU it is :func:`infralens.tools.bench.cuda_timer` (the book's one timing
harness); the tests pass a fake one. Results are plain dicts and lists (JSON-able,
``None`` where a number does not exist), one entry per variant, so a failing backend is
recorded with its error instead of stopping the sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from infralens.attention.flops import attention_flops
from infralens.attention.gqa import grouped_query_attention
from infralens.tools.bench import Timer

#: SDPA backends by the names the chapter uses. "math" is PyTorch's reference composite: it
#: materializes the (B, a, S, S) scores in HBM, which makes it the naive baseline.
BACKENDS: dict[str, SDPBackend] = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:200]


def _sdpa(q, k, v, causal: bool, backend: str | None, gqa: bool):
    """A callable running SDPA under one backend (None: let PyTorch choose)."""
    def run():
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        with sdpa_kernel(BACKENDS[backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    return run


def _prepare(q, k, v, causal: bool, backend: str | None, naive: Callable | None = None):
    """Try native GQA (enable_gqa=True); if the backend refuses it, expand K and V to a heads.

    Returns (callable, output of one call, how GQA ran). The FLOPs are the same either way; only
    the bytes of K and V differ. Backend "naive" calls ``naive(q, k, v, causal=...)`` on
    expanded K and V: the unfused baseline that writes the scores and probabilities to HBM.
    """
    if backend == "naive":
        if naive is None:
            raise RuntimeError("backend 'naive' needs a naive attention function")
        g = q.shape[1] // k.shape[1]
        ke, ve = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)

        def fn():
            return naive(q, ke, ve, causal=causal)
        return fn, fn(), "expanded" if g > 1 else "mha"
    if k.shape[1] == q.shape[1]:
        fn = _sdpa(q, k, v, causal, backend, gqa=False)
        return fn, fn(), "mha"
    try:
        fn = _sdpa(q, k, v, causal, backend, gqa=True)
        return fn, fn(), "native"
    except RuntimeError:
        g = q.shape[1] // k.shape[1]
        ke, ve = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        fn = _sdpa(q, ke, ve, causal, backend, gqa=False)
        return fn, fn(), "expanded"


# [attention:prefill-sweep]
def prefill_sweep(n_heads: int, n_kv_heads: int, head_dim: int, seq_lens: Iterable[int],
                  tokens: int, backends: Iterable[str], timer: Timer, *,
                  dtype: torch.dtype = torch.bfloat16, device: str = "cuda",
                  math_max_seq: int = 4096, naive: Callable | None = None,
                  seed: int = 0) -> dict:
    """Forward time and TFLOP/s of SDPA for one layer's heads, causal and not, per backend.

    Each sequence length runs ``tokens // S`` sequences, so every point does the same number
    of query tokens. FLOPs are :func:`~infralens.attention.flops.attention_flops` (causal = half).
    Backends are the keys of :data:`BACKENDS` and "naive" (``naive(q, k, v, causal=...)``,
    for example Lab 07's ``naive_attention``). "math" and "naive" are skipped above
    ``math_max_seq``: their scores need B*a*S^2 elements in HBM.
    The error column compares batch element 0 with a float64 reference at the shortest S.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    seq_lens, backends = list(seq_lens), list(backends)
    runs = []
    for S in seq_lens:
        B = max(1, tokens // S)
        q = torch.randn(B, n_heads, S, head_dim, generator=gen, device=device, dtype=dtype)
        k = torch.randn(B, n_kv_heads, S, head_dim, generator=gen, device=device, dtype=dtype)
        v = torch.randn(B, n_kv_heads, S, head_dim, generator=gen, device=device, dtype=dtype)
        refs = {}
        if S == min(seq_lens):  # float64 reference for batch element 0
            q0, k0, v0 = (t[:1].double() for t in (q, k, v))
            refs = {c: grouped_query_attention(q0, k0, v0, causal=c) for c in (False, True)}
        for backend in backends:
            for causal in (False, True):
                run = {"seq_len": S, "batch": B, "backend": backend, "causal": causal,
                       "flops": attention_flops(B, n_heads, S, S, head_dim, causal)}
                if backend in ("math", "naive") and S > math_max_seq:
                    run["skipped"] = f"materializes the scores: skipped above S = {math_max_seq}"
                    runs.append(run)
                    continue
                try:
                    fn, out, how = _prepare(q, k, v, causal, backend, naive)
                    run["gqa"] = how
                    if refs:
                        run["max_abs_err"] = float((out[:1].double() - refs[causal]).abs().max())
                    del out
                    ms = timer(fn)
                    fn = None
                    run["ms"] = ms
                    run["tflops"] = run["flops"] / (ms * 1e-3) / 1e12
                except (RuntimeError, torch.OutOfMemoryError) as err:
                    run["error"] = _one_line(err)
                runs.append(run)
        del q, k, v
    return {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "tokens": tokens,
            "dtype": str(dtype).removeprefix("torch."), "runs": runs}
# [/attention:prefill-sweep]


def layer_matmul_times(d_model: int, q_dim: int, kv_dim: int, d_ff: int, tokens: int,
                       timer: Timer, *, dtype: torch.dtype = torch.bfloat16,
                       device: str = "cuda", seed: int = 0) -> dict:
    """Time the seven weight matmuls of one dense SwiGLU layer on ``tokens`` tokens (cuBLAS)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    shapes = {"q": (d_model, q_dim), "k": (d_model, kv_dim), "v": (d_model, kv_dim),
              "o": (q_dim, d_model), "gate": (d_model, d_ff), "up": (d_model, d_ff),
              "down": (d_ff, d_model)}
    out = {}
    for name, (n_in, n_out) in shapes.items():
        x = torch.randn(tokens, n_in, generator=gen, device=device, dtype=dtype)
        w = torch.randn(n_in, n_out, generator=gen, device=device, dtype=dtype) / n_in**0.5
        ms = timer(lambda x=x, w=w: x @ w)
        flops = 2 * tokens * n_in * n_out
        out[name] = {"ms": ms, "flops": flops, "tflops": flops / (ms * 1e-3) / 1e12}
        del x, w
    return {"tokens": tokens, "matmuls": out,
            "ms": sum(m["ms"] for m in out.values()),
            "flops": sum(m["flops"] for m in out.values())}


# [attention:decode-sweep]
def decode_sweep(n_heads: int, n_kv_heads: int, head_dim: int, contexts: Iterable[int],
                 batches: Iterable[int], timer: Timer, *, dtype: torch.dtype = torch.bfloat16,
                 device: str = "cuda", expanded_max_bytes: int = 8 * 2**30, seed: int = 0) -> dict:
    """One decoding query per sequence against a cache of ``context`` keys (is_causal=False).

    Variant "gqa" reads the a_kv-head cache as it is stored; "expanded" first copies K and V to
    a heads (outside the timing), as a kernel without GQA support would need, and so reads
    a / a_kv times more bytes for the same FLOPs. GB/s counts the bytes of K and V the variant
    reads; the output and the query are negligible next to them.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    elem = torch.empty((), dtype=dtype).element_size()
    g = n_heads // n_kv_heads
    runs = []
    for B in batches:
        for C in contexts:
            q = torch.randn(B, n_heads, 1, head_dim, generator=gen, device=device, dtype=dtype)
            k = torch.randn(B, n_kv_heads, C, head_dim, generator=gen, device=device, dtype=dtype)
            v = torch.randn(B, n_kv_heads, C, head_dim, generator=gen, device=device, dtype=dtype)
            for variant in ("gqa", "expanded"):
                heads = n_kv_heads if variant == "gqa" else n_heads
                kv_bytes = 2 * B * heads * C * head_dim * elem
                run = {"batch": B, "context": C, "variant": variant, "kv_bytes": kv_bytes,
                       "flops": attention_flops(B, n_heads, 1, C, head_dim, causal=False)}
                if variant == "expanded" and (g == 1 or kv_bytes > expanded_max_bytes):
                    run["skipped"] = "same as gqa" if g == 1 else "expanded cache too large"
                    runs.append(run)
                    continue
                try:
                    if variant == "gqa":
                        fn, out, how = _prepare(q, k, v, False, None)
                    else:
                        ke, ve = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
                        fn, out, how = _prepare(q, ke, ve, False, None)
                        how = "expanded before timing"
                    run["gqa"] = how
                    del out
                    ms = timer(fn)
                    run.update(ms=ms, gbps=kv_bytes / (ms * 1e-3) / 1e9,
                               tflops=run["flops"] / (ms * 1e-3) / 1e12)
                except (RuntimeError, torch.OutOfMemoryError) as err:
                    run["error"] = _one_line(err)
                runs.append(run)
                if variant == "expanded":
                    ke = ve = fn = None
            del q, k, v
    return {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim,
            "dtype": str(dtype).removeprefix("torch."), "runs": runs}
# [/attention:decode-sweep]
