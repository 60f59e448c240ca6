"""The hardware constants as text: number formats and the Markdown tables of the reference page.

Tables are MyST Markdown (each number carries its ``{cite:p}`` role), rendered from executed
cells with ``IPython.display.Markdown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from infralens.hardware.derived import (
    hbm_bytes_per_sm_per_clock,
    hbm_sweep_seconds,
    implied_tensor_clock_hz,
    ridge_point,
    uncertain_specs,
)
from infralens.hardware.facts import FACTS
from infralens.hardware.notation import NOTATION, NOTATION_SOURCES
from infralens.hardware.specs import (
    _CUDA_GUIDE,
    CC_LIMITS,
    GB,
    GIB,
    GPU,
    GPUS,
    KB,
    KIB,
    MB,
    MIB,
    TB,
    Spec,
)
from infralens.tools.glue import markdown_table

__all__ = [
    "fmt_tbps", "fmt_gbps", "fmt_tflops", "fmt_tops", "fmt_bytes", "fmt_spec",
    "reference_table_markdown", "sm_limits_table_markdown", "derived_table_markdown",
    "notation_table_markdown", "units_table_markdown", "uncertainty_notes_markdown",
    "PRECISION_ROWS", "precision_table_markdown", "spec_table_markdown",
    "ALLOCATION_RULE_ROWS", "allocation_rules_table_markdown", "KERNEL_FACT_ROWS",
    "kernel_facts_table_markdown",
]


def _trim(x: float, decimals: int) -> str:
    s = f"{x:,.{decimals}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def fmt_tbps(bytes_per_s: float, decimals: int = 3) -> str:
    """3.35e12 -> '3.35 TB/s' (decimal TB)."""
    return f"{_trim(bytes_per_s / TB, decimals)} TB/s"


def fmt_gbps(bytes_per_s: float, decimals: int = 1) -> str:
    """9e11 -> '900 GB/s' (decimal GB)."""
    return f"{_trim(bytes_per_s / GB, decimals)} GB/s"


def fmt_tflops(flops: float, decimals: int = 1) -> str:
    """989.4e12 -> '989.4 TFLOP/s' (decimal tera)."""
    return f"{_trim(flops / TB, decimals)} TFLOP/s"


def fmt_tops(ops: float, decimals: int = 1) -> str:
    """1978.9e12 -> '1,978.9 TOP/s' (integer operations, decimal tera)."""
    return f"{_trim(ops / TB, decimals)} TOP/s"


def fmt_bytes(n: float, decimals: int = 2) -> str:
    """Binary units: 80 * 2**30 -> '80 GiB', 228 * 1024 -> '228 KiB'."""
    for unit, size in (("TiB", 1024**4), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{_trim(n / size, decimals)} {unit}"
    return f"{_trim(n, 0)} B"


def fmt_spec(spec: Spec | None) -> str:
    """Format a Spec by its unit; '—' for None."""
    if spec is None:
        return "—"
    v = spec.value
    if spec.unit == "B":
        return fmt_bytes(v)
    if spec.unit == "B/s":
        return fmt_tbps(v) if v >= TB else fmt_gbps(v)
    if spec.unit == "FLOP/s":
        return fmt_tflops(v)
    if spec.unit == "OP/s":
        return fmt_tops(v)
    if spec.unit == "Hz":
        return f"{_trim(v / 10**6, 0)} MHz"
    if spec.unit == "32-bit registers" and v % 1024 == 0:
        return f"{v // 1024} K"
    return f"{v:,}" if isinstance(v, int) else _trim(v, 3)


_DAGGER = "†"


def _cell(spec: Spec | None, cite: bool = True, suffix: str = "") -> str:
    if spec is None:
        return "not published"
    text = fmt_spec(spec) + suffix
    if spec.uncertain:
        text += _DAGGER
    if cite:
        text += f" {{cite:p}}`{spec.source}`"
    return text


def uncertainty_notes_markdown(gpus: Iterable[GPU] | None = None) -> str:
    """A bullet list, one line per uncertain Spec, saying where the value comes from."""
    items = uncertain_specs(gpus)
    if not items:
        return ""
    lines = [f"{_DAGGER} Not published by the vendor as such, or published inconsistently:", ""]
    for g, name, s in items:
        lines.append(f"- **{g.name}, {name}** = {fmt_spec(s)}: {s.note} {{cite:p}}`{s.source}`")
    return "\n".join(lines)


# [hardware:reference-table]
def reference_table_markdown(gpus: Iterable[GPU] | None = None, cite: bool = True,
                             notes: bool = True) -> str:
    """The GPU constants as a MyST Markdown table; every number carries its ``{cite:p}`` role.

    Rows are GPUs. Uncertain values carry a dagger and, with ``notes=True``, a bullet below
    the table says where each comes from. Render it from an executed cell with
    ``IPython.display.Markdown(...)`` (needs ``nb_render_markdown_format = "myst"``).
    """
    gpus = list(GPUS.values() if gpus is None else gpus)
    header = ["GPU", "CC", "SMs", "HBM", "HBM bandwidth", "L2",
              "Dense BF16", "Dense FP8", "NVLink (both directions)"]
    rows = []
    for g in gpus:
        cc = g.cc_str + (f" {{cite:p}}`{_CUDA_GUIDE}`" if cite else "")
        rows.append([
            g.name, cc, _cell(g.sm_count, cite),
            _cell(g.hbm_capacity_bytes, cite, f" {g.memory_type}"),
            _cell(g.hbm_bandwidth_bytes_per_s, cite), _cell(g.l2_bytes, cite),
            _cell(g.dense_bf16_flops, cite),
            _cell(g.dense_fp8_flops, cite) if g.dense_fp8_flops else "no FP8",
            _cell(g.nvlink_bandwidth_bytes_per_s, cite),
        ])
    out = markdown_table(header, rows)
    if notes:
        extra = uncertainty_notes_markdown(gpus)
        if extra:
            out += "\n\n" + extra
    return out
# [/hardware:reference-table]


def sm_limits_table_markdown(cite: bool = True) -> str:
    """Per-SM limits by compute capability, with the GPUs of this module that have it."""
    header = ["CC", "GPUs", "Shared memory / SM", "Shared memory / block", "32-bit registers / SM",
              "Threads / SM", "Warps / SM", "Blocks / SM", "Warp size"]
    rows = []
    for cc, lim in CC_LIMITS.items():
        names = ", ".join(g.name for g in GPUS.values() if g.compute_capability == cc)
        rows.append([f"{cc[0]}.{cc[1]}", names] + [
            _cell(getattr(lim, f), cite) for f in (
                "smem_per_sm_bytes", "smem_per_block_max_bytes", "registers_per_sm",
                "max_threads_per_sm", "max_warps_per_sm", "max_blocks_per_sm", "warp_size")])
    return markdown_table(header, rows)


def derived_table_markdown(gpus: Iterable[GPU] | None = None) -> str:
    """Quantities computed from the constants (no citations: each follows from cited values)."""
    gpus = list(GPUS.values() if gpus is None else gpus)
    header = ["GPU", "Ridge BF16 (FLOP/B)", "Ridge FP8 (FLOP/B)", "Read all HBM once (ms)",
              "Implied Tensor-Core clock (MHz)", "HBM bytes / SM / clock"]
    rows = []
    for g in gpus:
        dag = _DAGGER if (g.hbm_bandwidth_bytes_per_s.uncertain) else ""
        fp8 = f"{ridge_point(g, 'fp8'):,.0f}{dag}" if g.dense_fp8_flops else "no FP8"
        clock = implied_tensor_clock_hz(g)
        bpc = hbm_bytes_per_sm_per_clock(g)
        unc_sm = _DAGGER if (g.sm_count is not None and g.sm_count.uncertain) else ""
        rows.append([
            g.name, f"{ridge_point(g, 'bf16'):,.0f}{dag}", fp8,
            f"{hbm_sweep_seconds(g) * 1e3:,.1f}{dag}",
            "—" if clock is None else f"{clock / 1e6:,.0f}{unc_sm}",
            "—" if bpc is None else f"{bpc:,.1f}{unc_sm}",
        ])
    return markdown_table(header, rows)




# [hardware:precision-table]
#: The rows of :func:`precision_table_markdown`: (precision, where it runs, GPU field).
PRECISION_ROWS: tuple[tuple[str, str, str], ...] = (
    ("FP64", "FP64 units", "nontensor_fp64_flops"),
    ("FP64", "Tensor Cores", "dense_fp64_flops"),
    ("FP32", "FP32 units", "nontensor_fp32_flops"),
    ("TF32", "Tensor Cores", "dense_tf32_flops"),
    ("BF16", "Tensor Cores", "dense_bf16_flops"),
    ("FP16", "Tensor Cores", "dense_fp16_flops"),
    ("FP8", "Tensor Cores", "dense_fp8_flops"),
    ("INT8", "Tensor Cores", "dense_int8_ops"),
)


def precision_table_markdown(gpu: GPU, cite: bool = True) -> str:
    """One GPU's peak rate in every precision the vendor prints, dense, each cited, with its
    ratio to the FP32 rate outside the Tensor Cores. Rows the vendor leaves blank are left out."""
    base = gpu.nontensor_fp32_flops
    header = ["Precision", "Runs on", "Peak, dense", "× FP32 on FP32 units"]
    rows = []
    for precision, unit, field in PRECISION_ROWS:
        spec = getattr(gpu, field)
        if spec is None:
            continue
        ratio = "—" if base is None else f"{spec.value / base.value:,.1f}"
        rows.append([precision, unit, _cell(spec, cite), ratio])
    return markdown_table(header, rows)
# [/hardware:precision-table]


_SI_UNITS = {"B", "B/s", "FLOP/s", "OP/s", "Hz"}


def _value(spec: Spec) -> str:
    """A Spec's value with its unit written out where fmt_spec does not (counts)."""
    text = fmt_spec(spec)
    return text if spec.unit in _SI_UNITS else f"{text} {spec.unit}"


def spec_table_markdown(rows: Iterable[tuple[str, Spec]], cite: bool = True,
                        notes: bool = True) -> str:
    """(quantity, Spec) pairs as a MyST table: the quantity, its value with its unit and
    citation (a dagger where the value is uncertain) and, with ``notes``, the Spec's note."""
    out = []
    for what, spec in rows:
        value = _value(spec) + (_DAGGER if spec.uncertain else "")
        if cite:
            value += f" {{cite:p}}`{spec.source}`"
        out.append([what, value, spec.note] if notes else [what, value])
    return markdown_table(["Quantity", "Value", "Note"][:3 if notes else 2], out)


#: The rows of :func:`allocation_rules_table_markdown`: (quantity, AllocationRules field).
ALLOCATION_RULE_ROWS: tuple[tuple[str, str], ...] = (
    ("32-bit registers per thread, at most", "max_registers_per_thread"),
    ("Register allocation unit", "register_allocation_unit"),
    ("Shared memory reserved per block", "smem_reserved_per_block"),
    ("Shared-memory allocation unit", "smem_allocation_unit"),
    ("Shared memory per block without opt-in", "smem_per_block_default"),
)


def allocation_rules_table_markdown(rules: Mapping[tuple[int, int], object],
                                    cite: bool = True) -> str:
    """How each compute capability allocates registers and shared memory to a block, one column
    per capability. ``rules`` maps a compute capability to an object with the Spec fields of
    ``ALLOCATION_RULE_ROWS`` (:data:`infralens.gpuarch.occupancy.RULES`, which imports this
    package, so the page passes it in)."""
    ccs = list(rules)
    header = ["Quantity"] + [f"CC {a}.{b}" for a, b in ccs]
    rows = []
    for what, field in ALLOCATION_RULE_ROWS:
        cells = []
        for cc in ccs:
            spec = getattr(rules[cc], field)
            cells.append(_value(spec) + (f" {{cite:p}}`{spec.source}`" if cite else ""))
        rows.append([what, *cells])
    return markdown_table(header, rows)


#: The rows of :func:`kernel_facts_table_markdown`: (quantity, FACTS key).
KERNEL_FACT_ROWS: tuple[tuple[str, str], ...] = (
    ("FP32 units per SM, CC 8.0 (one FMA each per clock)", "a100_fp32_lanes_per_sm"),
    ("FP32 units per SM, CC 9.0", "h100_fp32_lanes_per_sm"),
    ("Special-function results per clock per SM, CC 8.0 and 9.0", "sfu_results_per_clock_per_sm"),
    ("Tensor Memory per SM, CC 10.0", "blackwell_tmem_per_sm_bytes"),
    ("Shared-memory banks", "smem_banks"),
    ("Shared-memory bank width", "smem_bank_width_bytes"),
    ("Global-memory sector", "sector_bytes"),
    ("L1 and L2 cache line", "cache_line_bytes"),
)


def kernel_facts_table_markdown(cite: bool = True) -> str:
    """The per-SM pipe widths and memory granularities kernel code is written against."""
    return spec_table_markdown(((what, FACTS[key]) for what, key in KERNEL_FACT_ROWS), cite,
                               notes=False)


def notation_table_markdown(cite: bool = True) -> str:
    """NOTATION as a MyST table: symbol (math role), meaning, convention (cited)."""
    rows = []
    for sym in NOTATION:
        key = NOTATION_SOURCES.get(sym.convention)
        conv = "this book" if key is None else (f"{{cite:t}}`{key}`" if cite else key)
        rows.append([f"{{math}}`{sym.latex}`", sym.meaning, conv])
    return markdown_table(["Symbol", "Meaning", "Convention"], rows)


def units_table_markdown() -> str:
    """Decimal vs binary prefixes as this book uses them; the factors are computed, not typed."""
    def power(base: int, n: int) -> str:
        e = 0
        while n > 1:
            n //= base
            e += 1
        return f"{{math}}`{base}^{{{e}}}`"
    rows = [
        [", ".join(f"1 {u}" for u in ("KB", "MB", "GB", "TB")),
         ", ".join(power(10, f) for f in (KB, MB, GB, TB)) + " bytes",
         "bandwidths (GB/s, TB/s); FLOP rates (TFLOP/s) use the same decimal prefixes"],
        [", ".join(f"1 {u}" for u in ("KiB", "MiB", "GiB")),
         ", ".join(power(2, f) for f in (KIB, MIB, GIB)) + " bytes",
         "shared memory, L2 and HBM capacities"],
    ]
    return markdown_table(["Unit", "Bytes", "Used here for"], rows)
