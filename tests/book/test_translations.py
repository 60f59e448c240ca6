"""The translations: every translated page's catalog is complete and keeps the English's markup,
and a change to the English marks the translation fuzzy instead of silently keeping it."""

import tempfile
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po
from infralens_book import translations as tr


@pytest.fixture(scope="module")
def templates():
    with tempfile.TemporaryDirectory() as tmp:
        tr.extract(Path(tmp))
        yield Path(tmp)


@pytest.mark.parametrize("lang", sorted(tr.TRANSLATED))
def test_every_translated_page_is_complete_and_current(templates, lang):
    assert tr.problems(lang, tr.TRANSLATED[lang], pot_dir=templates) == []


def _write(path, messages, locale=None):
    catalog = Catalog(locale=locale)
    for msgid, msgstr in messages:
        catalog.add(msgid, msgstr)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog)


def test_a_changed_english_message_becomes_fuzzy_and_is_reported(tmp_path):
    pot, locales = tmp_path / "pot", tmp_path / "locales"
    old = "The KV cache grows with the context length, one vector per token per layer."
    new = "The KV cache grows with the context length, two vectors per token per layer."
    _write(pot / "page.pot", [(old, ""), ("Ledger", "")])
    tr.update(pot, "zh_CN", ("page",), locales)
    path = tr.catalog_path("zh_CN", "page", locales)
    catalog = read_po(path.open("rb"), locale="zh_CN")
    catalog[old].string = "KV 缓存随上下文长度增长，每层每个 token 一个向量。"
    catalog["Ledger"].string = "账本"
    with path.open("wb") as f:
        write_po(f, catalog)
    assert tr.problems("zh_CN", ("page",), locales) == []

    _write(pot / "page.pot", [(new, ""), ("Ledger", "")])  # the English changed
    tr.update(pot, "zh_CN", ("page",), locales)
    catalog = read_po(path.open("rb"), locale="zh_CN")
    assert catalog[new].fuzzy and catalog[new].string.startswith("KV 缓存")  # kept, but not trusted
    assert not catalog["Ledger"].fuzzy and catalog["Ledger"].string == "账本"
    assert old not in catalog
    assert [p for p in tr.problems("zh_CN", ("page",), locales) if "fuzzy" in p] != []


def test_translations_must_keep_roles_math_code_and_links(tmp_path):
    english = ("See {ref}`the notation <front-hardware-notation>`, $2\\Psi$ bytes, `zero_grad` "
               "and [x](y.html).")
    good = "见{ref}`符号表 <front-hardware-notation>`，$2\\Psi$ 字节、`zero_grad` 与 [x](y.html)。"
    for bad in (good.replace("$2\\Psi$", "2Ψ"), good.replace("front-hardware-notation", "front-hardware"),
                good.replace("`zero_grad`", "zero_grad"), good.replace("(y.html)", "(z.html)")):
        _write(tmp_path / "zh_CN" / "LC_MESSAGES" / "p.po", [(english, bad)], locale="zh_CN")
        assert any("changes roles" in p for p in tr.problems("zh_CN", ("p",), tmp_path)), bad
    _write(tmp_path / "zh_CN" / "LC_MESSAGES" / "p.po", [(english, good)], locale="zh_CN")
    assert tr.problems("zh_CN", ("p",), tmp_path) == []


def test_a_translation_that_would_parse_as_a_list_is_refused(tmp_path):
    _write(tmp_path / "zh_CN" / "LC_MESSAGES" / "p.po", [("+ gradients", "+ 梯度")], locale="zh_CN")
    assert any("list marker" in p for p in tr.problems("zh_CN", ("p",), tmp_path))
    _write(tmp_path / "zh_CN" / "LC_MESSAGES" / "p.po", [("+ gradients", "再加上梯度")], locale="zh_CN")
    assert tr.problems("zh_CN", ("p",), tmp_path) == []


def test_a_role_written_as_code_is_not_a_role():
    text = "Pages link here through `{term}` references; anchors read `term-<Term>`."
    assert tr._kept(text) == sorted(["`{term}`", "`term-<Term>`"])


def test_fuzzy_translations_are_not_shown():
    import importlib.util

    spec = importlib.util.spec_from_file_location("conf", tr.ROOT / "conf" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.gettext_allow_fuzzy_translations is False
    assert Path(conf.locale_dirs[0]) == tr.LOCALES
