"""A clean build of the whole book: no warnings, every anchor reachable, every GPU cell shown."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from infralens_book import anchors

from infralens.tools.cells import parse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-E", "-q",
         "-c", str(ROOT / "conf"), "-d", str(out / ".doctrees"), str(ROOT / "book"), str(out)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    # Sphinx's own warnings read "WARNING: ..."; the kernel's "[IPKernelApp] WARNING | running
    # over TCP" notice is not one.
    assert not re.search(r"\b(WARNING|ERROR): ", done.stderr), done.stderr[-5000:]
    return out


@pytest.mark.build
def test_every_registered_anchor_has_a_stable_url(built):
    registry = anchors.load_registry(ROOT / "conf" / "anchors.json")
    for label in list(registry["anchors"]) + list(registry["redirects"]):
        if not label.startswith("term:"):
            assert (built / "a" / f"{label}.html").is_file(), label


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
