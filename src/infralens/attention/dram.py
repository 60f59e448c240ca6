"""What attention kernels really move between HBM and the chip, counted by Nsight Compute.

The IO model of :mod:`~infralens.attention.io_model` charges every re-read of K and V to HBM, as
if nothing stayed in a cache. :func:`profile_attention` measures instead: it runs
``python -m infralens.attention.dram --impl IMPL ...`` under ``ncu``
(:func:`infralens.tools.ncu.profile`), once per implementation. The driver builds Q, K and V on
the host and copies them to the GPU (a copy, not a kernel), then runs one attention forward, so
every kernel ncu reports belongs to that implementation. ncu's default cache control flushes the
caches before each kernel it profiles: the counts start from a cold L2, as the first use of
freshly written Q, K, V would.

Implementations: ``triton`` (this package's kernel, :mod:`~infralens.attention.triton_flash`),
``sdpa_flash`` and ``sdpa_cudnn`` (``scaled_dot_product_attention`` restricted to PyTorch's
FlashAttention-2 or cuDNN backend).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from infralens.tools import ncu
from infralens.tools.cli import OneLineParser, UsageError, positive_int, run_main

__all__ = ["IMPLEMENTATIONS", "NCU_ATTENTION_METRICS", "profile_attention", "summarize", "main"]

IMPLEMENTATIONS = ("triton", "sdpa_flash", "sdpa_cudnn")

#: Bytes from and to DRAM; L2 traffic in 32-byte sectors from every unit (TMA included) and the
#: L2 hit rate; local-memory (register spill) sectors; time; warp instructions, how busy the
#: issue slots were, and the Tensor-Core pipe: the cycles it was active and its warp
#: instructions, all of them (``hmma``: on Hopper, mma.sync and wgmma alike) and the wgmma ones
#: (``gmma``). Metrics a GPU lacks are dropped and listed.
NCU_ATTENTION_METRICS = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_op_write.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "gpu__time_duration.sum",
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
)

_SUMMED = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_op_read.sum",
           "lts__t_sectors_op_write.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
           "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", "gpu__time_duration.sum",
           "smsp__inst_executed.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum",
           "sm__inst_executed_pipe_tensor_op_gmma.sum")


# [attention:dram]
def summarize(kernels: Mapping[str, Mapping[str, float | None]]) -> dict:
    """One implementation's counters: bytes, sectors, time and instructions summed over its
    kernels; rates and percentages from its longest kernel (``main``), the attention itself."""
    if not kernels:
        raise ValueError("no kernel was profiled")
    main = max(kernels, key=lambda k: kernels[k].get("gpu__time_duration.sum") or 0)
    totals = {m: sum(c.get(m) or 0 for c in kernels.values()) for m in _SUMMED}
    return {"main": main, "kernels": len(kernels), "totals": totals, "main_counters": dict(kernels[main])}


def profile_attention(impls: Iterable[str] = IMPLEMENTATIONS, *, batch: int = 1, heads: int = 16,
                      seq: int = 16384, head_dim: int = 128, causal: bool = False,
                      metrics: Sequence[str] = NCU_ATTENTION_METRICS, timeout: float = 600.0) -> dict:
    """Nsight Compute's counters of one bf16 attention forward per implementation (see the module)."""
    args = ["--batch", str(batch), "--heads", str(heads), "--seq", str(seq),
            "--head-dim", str(head_dim)] + (["--causal"] if causal else [])
    env = dict(os.environ)  # the driver imports this package: make sure it can
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    env.pop("TRITON_INTERPRET", None)  # the real compiler, not the CPU interpreter
    out: dict = {"shape": {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
                           "causal": causal, "dtype": "bfloat16"}, "runs": {}}
    for impl in impls:
        prof = ncu.profile([sys.executable, "-m", "infralens.attention.dram", "--impl", impl, *args],
                           metrics, env=env, timeout=timeout)
        out["ncu_version"], out["missing"] = prof["ncu_version"], prof["missing"]
        out["runs"][impl] = {**summarize(prof["kernels"]), "all_kernels": prof["kernels"]}
    return out
# [/attention:dram]


def _drive(args: argparse.Namespace) -> None:
    """One attention forward of ``args.impl`` on inputs copied from the host (no other kernel)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16).to("cuda") for _ in range(3))
    if args.impl == "triton":
        from infralens.attention.triton_flash import flash_attention

        flash_attention(q, k, v, causal=args.causal)
    else:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = SDPBackend.FLASH_ATTENTION if args.impl == "sdpa_flash" else SDPBackend.CUDNN_ATTENTION
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    torch.cuda.synchronize()


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m infralens.attention.dram",
                           description="Run one bf16 attention forward for Nsight Compute to watch.")
    parser.add_argument("--impl", required=True, choices=IMPLEMENTATIONS)
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=positive_int, default=16)
    parser.add_argument("--seq", type=positive_int, default=16384)
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--causal", action="store_true")

    def prepare(argv: Sequence[str] | None) -> argparse.Namespace:
        args = parser.parse_args(argv)
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"no CUDA GPU visible to PyTorch {torch.__version__}: the driver runs the "
                             "kernels on one (run it on a machine with an NVIDIA GPU)")
        needed = 4 * args.batch * args.heads * args.seq * args.head_dim * 2  # Q, K, V, O in bf16
        free = torch.cuda.mem_get_info()[0]
        if needed > free:
            raise UsageError(f"Q, K, V and O need {needed / 2**30:,.1f} GiB; the GPU has "
                             f"{free / 2**30:,.1f} GiB free")
        return args

    return run_main(parser.prog, argv, prepare, _drive, errors=(UsageError,))


if __name__ == "__main__":
    sys.exit(main())
