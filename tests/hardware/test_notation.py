"""The book's notation: each symbol once, each convention cited in a bibliography file."""

from __future__ import annotations

import dataclasses

import pytest

from infralens import hardware as hw
from infralens.hardware.notation import NOTATION, NOTATION_SOURCES, Symbol

from .bib import all_bib_keys


def test_notation_sources_exist_in_some_bib_file():
    keys = set(all_bib_keys())
    missing = sorted(set(hw.NOTATION_SOURCES.values()) - keys)
    assert not missing, (f"notation cites {missing}; add them to conf/bib/references.bib "
                         "(owned by the bibliography) or drop the citation")


def test_notation_covers_the_book_symbols_once():
    symbols = [s.symbol for s in hw.NOTATION]
    assert len(symbols) == len(set(symbols))
    required = {"b", "s", "h", "a", "a_kv", "d_h", "L", "V", "d_ff", "Ψ", "N_d", "t", "p", "K",
                "E", "k"}
    assert required <= set(symbols)
    for s in hw.NOTATION:
        assert s.convention in hw.NOTATION_SOURCES or s.convention == "book"


def test_conventions_are_the_papers_own_symbols():
    # Korthikanti et al. (2022), Section 2: a, b, h, L, p, s, t, v (the book writes V for v).
    korthikanti = {s.symbol for s in NOTATION if s.convention == "korthikanti"}
    assert korthikanti == {"a", "b", "h", "L", "p", "s", "t", "V"}
    # Rajbhandari et al. (2020), ZeRO: Psi parameters, K optimizer bytes per parameter, N_d GPUs.
    assert {s.symbol for s in NOTATION if s.convention == "zero"} == {"Ψ", "K", "N_d"}


def test_every_latex_form_parses_as_math():
    from matplotlib.mathtext import MathTextParser

    parser = MathTextParser("path")
    for s in NOTATION:
        width, height, *_ = parser.parse(f"${s.latex}$")
        assert width > 0 and height > 0, s


def test_symbols_and_sources_are_read_only():
    s = NOTATION[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.symbol = "B"  # type: ignore[misc]
    with pytest.raises(TypeError):
        NOTATION_SOURCES["new"] = "key"  # type: ignore[index]
    assert isinstance(NOTATION, tuple) and all(isinstance(x, Symbol) for x in NOTATION)
