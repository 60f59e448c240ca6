"""The built site in a real browser: headless Chromium (Debian's package) driven by Playwright,
over the clean build served on 127.0.0.1, with every request outside the site blocked.

Without Chromium the tests are skipped, unless INFRALENS_REQUIRE_BROWSER=1 (CI sets it, after
installing the browser), which makes a missing browser a failure.
"""

import functools
import http.server
import os
import shutil
import threading
from urllib.parse import urlsplit

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("INFRALENS_REQUIRE_BROWSER") == "1":
    raise RuntimeError("INFRALENS_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.build,
              pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
LONG_PAGE = "handbook/ch07-transformer-math.html"  # the page with the most math
NESTED_PAGE = "labs/lab04-reduce.html"  # a page outside the root folder


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(built):
    """The clean build served over HTTP on 127.0.0.1; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=built))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Visit:
    """A browser tab on the site that records console errors, failed requests and requests that
    try to leave the site (those are aborted)."""

    def __init__(self, browser, site, viewport):
        self.site = site
        self.context = browser.new_context(viewport=viewport)
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.rstrip("/"))
        self.outside, self.errors, self.failed = [], [], []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.site) or urlsplit(url).scheme in ("data", "blob"):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def open(self, path):
        self.page.goto(self.site + path, wait_until="load")
        self.page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
        self.page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def phone(browser, site):
    visit = Visit(browser, site, PHONE)
    yield visit
    visit.close()


@pytest.fixture
def desktop(browser, site):
    visit = Visit(browser, site, DESKTOP)
    yield visit
    visit.close()


def _pages(built):
    """Every page of every edition (the translations live in folders such as zh_CN/)."""
    skip = {"a", "_static", "_sources", "_images"}
    return sorted(str(p.relative_to(built)) for p in built.rglob("*.html")
                  if not skip & set(p.relative_to(built).parts[:2]))


def test_every_page_loads_offline_without_errors_and_fits_a_phone(built, phone):
    wide = []
    for path in _pages(built):
        page = phone.open(path)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 0:
            wide.append(f"{path} (+{overflow} px)")
    assert phone.outside == [], "requests leaving the site"
    assert phone.failed == [], "failed requests"
    assert phone.errors == [], "console errors"
    assert wide == [], "pages wider than a 390 px screen"


def test_code_cells_fit_a_desktop_screen_without_scrolling(built, desktop):
    scrolling = []
    for path in _pages(built):
        page = desktop.open(path)
        n = page.evaluate("() => [...document.querySelectorAll('.cell_input pre')]"
                          ".filter(e => e.scrollWidth > e.clientWidth).length")
        if n:
            scrolling.append(f"{path} ({n})")
    assert scrolling == [], "code cells that scroll sideways at 1400 px"


def test_math_renders_from_the_book_itself_on_the_longest_page(desktop):
    page = desktop.open(LONG_PAGE)
    n_math = page.locator(".math").count()
    assert n_math > 100
    assert page.evaluate("() => MathJax.version").startswith("3.")
    # Lazy typesetting: scroll the last formula into view, then every formula has been replaced
    # by MathJax's output and no raw TeX delimiters are left in the text.
    page.locator(".math").last.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.math')].slice(-1)[0].querySelector('mjx-container mjx-math')")
    raw = page.evaluate("() => [...document.querySelectorAll('.math')]"
                        ".filter(e => !e.querySelector('mjx-container')).length")
    assert raw == 0
    assert desktop.outside == [] and desktop.errors == [] and desktop.failed == []


def test_cite_button_copies_a_stable_url_that_lands_on_its_heading(desktop):
    page = desktop.open(NESTED_PAGE)
    button = page.locator("section[id] > button.infralens-cite").nth(1)
    section_id = button.evaluate("b => b.parentElement.id")
    button.click()
    page.wait_for_function("() => document.querySelector('button.infralens-cite') !== null")
    text = page.evaluate("() => navigator.clipboard.readText()")
    url = text.rsplit(", ", 1)[1]
    assert url.startswith(desktop.site + "a/") and url.endswith(".html"), text
    page.goto(url)
    page.wait_for_url(f"**/{NESTED_PAGE}#{section_id}")
    assert page.locator(f"#{section_id}").is_visible()


def test_glossary_term_cite_button_copies_its_stable_url(desktop):
    page = desktop.open("back/glossary.html")
    button = page.locator("dt[id^='term-'] button.infralens-cite").first
    term_id = button.evaluate("b => b.closest('dt').id")
    button.click()
    text = page.evaluate("() => navigator.clipboard.readText()")
    assert text.endswith(f"{desktop.site}a/{term_id}.html"), text
    page.goto(text.rsplit(", ", 1)[1])
    page.wait_for_url(f"**/back/glossary.html#{term_id}")


@pytest.mark.parametrize("toggle, dialog", [(".primary-toggle", "#pst-primary-sidebar-modal"),
                                            (".secondary-toggle", "#pst-secondary-sidebar-modal")])
def test_sidebar_buttons_open_the_navigation_on_a_phone(phone, toggle, dialog):
    page = phone.open(NESTED_PAGE)
    page.locator(f"{toggle}:visible").first.click()
    page.wait_for_selector(f"{dialog}[open]")
    assert page.locator(f"{dialog} a").count() > 5
    page.keyboard.press("Escape")
    page.wait_for_selector(f"{dialog}:not([open])", state="attached")


def test_one_search_box_and_snippets_without_the_page_chrome(desktop):
    page = desktop.open("index.html")
    visible = page.locator(".search-button__button:visible, input[type=search]:visible")
    assert visible.count() == 1, "search fields a reader sees"
    page = desktop.open("search.html?q=occupancy")
    page.wait_for_function("() => document.querySelectorAll('#search-results li p.context').length >= 3",
                           timeout=60_000)
    # The text Sphinx cuts snippets from, for a long page: none of the "On this page" contents,
    # the cite buttons or the code-cell toggles may be in it.
    found = page.evaluate("""async () => {
        const html = await (await fetch("handbook/ch01-gpu-architecture.html")).text();
        const text = Search.htmlToText(html).replace(/\\s+/g, " ");
        const doc = new DOMParser().parseFromString(html, "text/html");
        const toc = doc.querySelector(".bd-sidebar-secondary").textContent.replace(/\\s+/g, " ").trim();
        return {length: text.length, toc: text.includes(toc.slice(0, 300)),
                cites: (text.match(/cite(?=[A-Z])/g) || []).length,
                toggles: text.includes("Show code cell source")};
    }""")
    assert found["length"] > 10_000, found
    assert found == {"length": found["length"], "toc": False, "cites": 0, "toggles": False}, found
    assert desktop.errors == [] and desktop.outside == []


def test_language_switch_lands_on_the_same_section_in_the_other_edition(desktop):
    page = desktop.open("labs/lab01-memory-accounting.html#lab01-mental-model")
    switch = page.locator("a.lang-switch")
    assert switch.count() == 1
    switch.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("zh_CN/labs/lab01-memory-accounting.html#lab01-mental-model"), page.url
    assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
    heading = page.locator("#lab01-mental-model h2").inner_text()
    assert any("\u4e00" <= ch <= "\u9fff" for ch in heading), heading  # the heading is in Chinese
    page.locator("a.lang-switch").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/labs/lab01-memory-accounting.html#lab01-mental-model")
    assert "/zh_CN/" not in page.url
    assert desktop.errors == [] and desktop.outside == []
