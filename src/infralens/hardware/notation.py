"""The book's symbols (b, s, h, a, L, V, Ψ, N_d, t, p, ...), each with the convention it follows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["Symbol", "NOTATION", "NOTATION_SOURCES"]


@dataclass(frozen=True)
class Symbol:
    """One symbol of the book's notation. ``latex`` goes inside a ``{math}`` role; it is the
    symbol itself unless given (``a_{kv}`` for ``a_kv``)."""

    symbol: str
    meaning: str
    convention: str  # a key of NOTATION_SOURCES, or "book"
    latex: str = ""

    def __post_init__(self) -> None:
        if not self.latex:
            object.__setattr__(self, "latex", self.symbol)


#: Where a symbol's convention comes from -> BibTeX key (in conf/bib/references.bib).
NOTATION_SOURCES: Mapping[str, str] = MappingProxyType({
    "korthikanti": "korthikanti2022reducing",
    "zero": "rajbhandari2020zero",
})

# [hardware:notation]
NOTATION: tuple[Symbol, ...] = (
    Symbol("b", "micro-batch size (sequences per micro-batch)", "korthikanti"),
    Symbol("s", "sequence length (tokens)", "korthikanti"),
    Symbol("h", "hidden size (model width)", "korthikanti"),
    Symbol("a", "number of attention (query) heads", "korthikanti"),
    Symbol("a_kv", "number of key/value heads (a_kv = a without GQA/MQA)", "book", latex="a_{kv}"),
    Symbol("d_h", "head dimension (h / a in most models, not in all)", "book"),
    Symbol("L", "number of transformer layers", "korthikanti"),
    Symbol("V", "vocabulary size (Korthikanti et al. write v)", "korthikanti"),
    Symbol("d_ff", "FFN hidden size (4h in Korthikanti et al.)", "book", latex="d_{ff}"),
    Symbol("Ψ", "number of model parameters", "zero", latex=r"\Psi"),
    Symbol("N_d", "data-parallel degree", "zero"),
    Symbol("t", "tensor-parallel degree", "korthikanti"),
    Symbol("p", "pipeline-parallel degree", "korthikanti"),
    Symbol("K", "optimizer-state bytes per parameter (12 for mixed-precision Adam)", "zero"),
    Symbol("E", "number of experts in a mixture-of-experts layer", "book"),
    Symbol("k", "experts each token is routed to (top-k)", "book"),
)
# [/hardware:notation]
