"""A clean build of the whole book (the `built` fixture, conftest.py): every anchor reachable,
every GPU cell shown."""

import re
from pathlib import Path

import pytest
from infralens_book import anchors

from infralens.tools.cells import parse

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.build
def test_every_registered_anchor_has_a_stable_url(built):
    registry = anchors.load_registry(ROOT / "conf" / "anchors.json")
    for label in list(registry["anchors"]) + list(registry["redirects"]):
        if not label.startswith("term:"):
            assert (built / "a" / f"{label}.html").is_file(), label


@pytest.mark.build
def test_every_glossary_term_has_a_stable_url_and_a_cite_button(built):
    page = (built / "back" / "glossary.html").read_text(encoding="utf-8")
    ids = re.findall(r'<dt id="(term-[^"]+)"', page)
    assert len(ids) >= 20
    for termid in ids:
        forwarder = (built / "a" / f"{termid}.html").read_text(encoding="utf-8")
        assert f'url=../back/glossary.html#{termid}"' in forwarder, termid
        assert f'data-href="a/{termid}.html"' in page, termid


@pytest.mark.build
def test_no_forwarder_points_at_a_page_that_was_not_built(built):
    for forwarder in (built / "a").glob("*.html"):
        target = re.search(r'url=\.\./([^"#]+)', forwarder.read_text(encoding="utf-8"))[1]
        assert (built / target).is_file(), forwarder.name


@pytest.mark.build
def test_every_gpu_cell_shows_a_record_or_says_it_has_none(built):
    for cell in parse.gpu_cells(ROOT / "book"):
        page = (built / f"{cell.page}.html").read_text(encoding="utf-8")
        assert f"GPU record <code class=\"docutils literal notranslate\"><span class=\"pre\">{cell.record}" \
            in page or f"{cell.record}</span></code>: not measured yet" in page, cell.record


@pytest.mark.build
def test_labelled_headings_offer_a_citation(built):
    page = (built / "back" / "citing.html").read_text(encoding="utf-8")
    assert 'data-href="a/citing-urls.html"' in page
