"""The hardware constants as text: number formats and the Markdown tables of the reference page.

Tables are MyST Markdown (each number carries its ``{cite:p}`` role), rendered from executed
cells with ``IPython.display.Markdown``.
"""

from __future__ import annotations

from collections.abc import Iterable

from infralens.hardware.derived import (
    hbm_bytes_per_sm_per_clock,
    hbm_sweep_seconds,
    implied_tensor_clock_hz,
    ridge_point,
    uncertain_specs,
)
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
    "fmt_tbps", "fmt_gbps", "fmt_tflops", "fmt_bytes", "fmt_spec",
    "reference_table_markdown", "sm_limits_table_markdown", "derived_table_markdown",
    "notation_table_markdown", "units_table_markdown", "uncertainty_notes_markdown",
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
