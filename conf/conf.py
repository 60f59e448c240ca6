"""Sphinx configuration of the InfraLens book: `sphinx-build -c conf book _build/html`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONF = Path(__file__).resolve().parent
ROOT = CONF.parent
sys.path.insert(0, str(CONF / "_ext"))

# The execution kernel inherits this process's environment (sys.path edits do not reach it).
os.environ["TRITON_INTERPRET"] = "1"          # Triton kernels run on the CPU, in the interpreter
os.environ["IPYTHONDIR"] = str(CONF / "ipython")  # SVG + PDF figures (ipython_kernel_config.py)
os.environ["INFRALENS_BOOK"] = str(ROOT / "book")
os.environ.setdefault("PYTHONHASHSEED", "0")

project = "InfraLens"
author = "The InfraLens authors"
copyright = "2026, The InfraLens authors"
release = "0.1"

extensions = [
    "myst_nb",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx_exercise",
    "sphinx_proof",
    "sphinx_togglebutton",
    "sphinxcontrib.bibtex",
    "infralens_book",
]

exclude_patterns = ["_build", "_records", "**/.ipynb_checkpoints"]
numfig = True
nitpicky = False

# --- MyST and notebook execution -------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist", "substitution",
                          "attrs_inline"]
myst_dmath_double_inline = True
nb_execution_mode = "cache"                      # jupyter-cache: unchanged cells never re-run
nb_execution_cache_path = str(ROOT / "_build" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True               # a failing cell fails the build
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "myst"               # Markdown outputs may use roles ({cite}, {ref})
nb_output_stderr = "warn"                        # stray stderr in a cell is a (fatal) warning

# --- Bibliography ------------------------------------------------------------------------------
bibtex_bibfiles = sorted(str(p.relative_to(CONF)) for p in (CONF / "bib").glob("*.bib"))
bibtex_default_style = "infralens"  # plain, labelled "Author et al., year" (infralens_book.citations)
bibtex_reference_style = "author_year"

# --- HTML --------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "InfraLens"
html_static_path = ["_static"]
html_css_files = ["infralens.css"]
html_js_files = ["cite.js", "sidebars.js", "search_snippets.js", "lang_switch.js"]
# One search box: the header's button (also Ctrl+K), at every width; the theme's default sidebar
# adds a second field above the navigation.
html_sidebars = {"**": ["navbar-logo.html", "sbt-sidebar-nav.html"]}
# No domain index pages: the only one would be sphinx-proof's, which lists bare labels; the
# statements are reached from their chapters.
html_domain_indices = False
# MathJax from the book itself (infralens_book.offline_math copies it), typeset lazily: a long
# page typesets the math near the screen first.
mathjax_path = "mathjax/tex-chtml.js"
mathjax3_config = {"loader": {"load": ["ui/lazy"]}}
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
}
html_context = {"default_mode": "auto"}  # light or dark as the reader's system says
copybutton_exclude = ".linenos, .gp"

# --- Translations (infralens_book.translations) ------------------------------------------------
# One catalog per translated page (conf/locales/<lang>/LC_MESSAGES/<page>.po); untranslated pages
# and fuzzy entries show the English. `nox -s catalogs` refreshes the catalogs.
locale_dirs = [str(CONF / "locales")]  # Sphinx resolves relative ones against book/
gettext_compact = False
gettext_location = False
gettext_uuid = False
gettext_allow_fuzzy_translations = False

# --- LaTeX / PDF -------------------------------------------------------------------------------
latex_engine = "xelatex"
latex_use_xindy = False
latex_documents = [("index", "infralens.tex", "InfraLens", author, "manual")]
latex_elements = {
    "papersize": "a4paper",
    "fontpkg": r"""
\setmainfont{FreeSerif}
\setsansfont{FreeSans}
\setmonofont{FreeMono}
""",
    # Chapters carry their own names ("Chapter 1 — ...", "Lab 04 — ..."), so LaTeX numbers no
    # heading, and figures and tables are numbered through the book. Code and tables are set
    # smaller than the text (the book's code is up to 110 columns wide), and identifiers in
    # tables may break after an underscore; table columns sit closer together, and no column
    # is squeezed below the width of an 11-digit count (tabulary's \tymin).
    "preamble": r"""
\usepackage{newunicodechar}
\setcounter{secnumdepth}{-1}
\counterwithout{figure}{chapter}
\counterwithout{table}{chapter}
\fvset{fontsize=\footnotesize}
\newcommand{\infralenstables}{\footnotesize\setlength{\tabcolsep}{4pt}\setlength{\tymin}{56pt}\renewcommand{\_}{\textunderscore\allowbreak}}
\AtBeginEnvironment{tabulary}{\infralenstables}
\AtBeginEnvironment{longtable}{\infralenstables}
\AtBeginEnvironment{tabular}{\infralenstables}
""",
    "sphinxsetup": "hmargin={0.75in,0.75in}, vmargin={0.8in,0.8in}",
}

# --- The book's own extension (conf/_ext/infralens_book) ------------------------------------------
infralens_anchor_registry = str(CONF / "anchors.json")


def _edition_settings(app, config) -> None:
    """The Chinese edition's PDF: xeCJK (Sphinx loads it for zh) with Debian's Noto CJK fonts."""
    if (config.language or "").startswith("zh"):
        # the Latin text is set as in the English PDF (English hyphenation, Chinese needs none)
        config.latex_elements["babel"] = ""
        config.latex_elements["polyglossia"] = r"\usepackage{polyglossia}\setmainlanguage{english}"
        # as in the English PDF: no default font features, so long code words may break at
        # hyphenation points (fontspec's defaults forbid it for the monospaced font)
        config.latex_elements["fontenc"] = "\n".join([
            r"\usepackage{fontspec}", r"\defaultfontfeatures[\rmfamily,\sffamily,\ttfamily]{}",
            r"\usepackage{xeCJK}"])
        config.html_js_files = [*config.html_js_files, "zh_stemmer.js"]  # see the file
        config.latex_elements["fontpkg"] += r"""
\setCJKmainfont{Noto Serif CJK SC}
\setCJKsansfont{Noto Sans CJK SC}
\setCJKmonofont{Noto Sans Mono CJK SC}
"""


def setup(app) -> None:
    app.connect("config-inited", _edition_settings)
