"""InfraLens build and test sessions.

    nox -s html     build the web book into _build/html (CPU cells executed, warnings are errors);
                    `-- --lang zh_CN` builds the Chinese edition into _build/html/zh_CN
    nox -s pdf      build the PDF with xelatex into _build/latex/infralens.pdf (`-- --lang zh_CN`:
                    _build/latex-zh_CN)
    nox -s catalogs refresh the translation catalogs (conf/locales) after the English changed
    nox -s tests    pytest over src and over the book's own checks
    nox -s gpu      execute every GPU cell on a CUDA machine and record the results
    nox -s lint     ruff over the code and over every page's code cells

The book sessions share one virtual environment (.nox/book, about 2.3 GB): making it once takes
about a minute, and it is reinstalled only when pyproject.toml or constraints.txt change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import nox

ROOT = Path(__file__).parent
BUILD = ROOT / "_build"
BOOK_ENV = ROOT / ".nox" / "book"
CONSTRAINTS = ROOT / "constraints.txt"

nox.options.sessions = ["html", "tests"]
nox.options.default_venv_backend = "none"  # the sessions manage their own shared environments


def _bin(env: Path, name: str) -> str:
    return str(env / ("Scripts" if os.name == "nt" else "bin") / name)


def _stamp_of(*parts: str) -> str:
    digest = hashlib.sha256()
    for path in (ROOT / "pyproject.toml", CONSTRAINTS):
        digest.update(path.read_bytes())
    for part in parts:
        digest.update(part.encode())
    return digest.hexdigest()


def _ensure_env(session: nox.Session, env: Path, extras: str) -> str:
    """Create `env` once and (re)install the project only when its inputs changed; return python."""
    python = _bin(env, "python")
    stamp_file = env / ".infralens-stamp"
    stamp = _stamp_of(extras, sys.version)
    if Path(python).exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return python
    if not Path(python).exists():
        session.log(f"creating {env.relative_to(ROOT)}")
        venv.EnvBuilder(with_pip=True).create(env)
    session.run(python, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                "-c", str(CONSTRAINTS), "-e", f"{ROOT}[{extras}]", external=True)
    stamp_file.write_text(stamp)
    return python


def _book_python(session: nox.Session) -> str:
    return _ensure_env(session, BOOK_ENV, "book,test")


def _sphinx(session: nox.Session, python: str, builder: str, outdir: Path, *extra: str) -> None:
    session.run(
        python, "-m", "sphinx", "-b", builder, "-c", str(ROOT / "conf"),
        "-W", "--keep-going", "-q", *extra, str(ROOT / "book"), str(outdir),
        external=True,
    )


def _edition(session: nox.Session, args: list[str]) -> tuple[str | None, list[str]]:
    """Split `--lang L` off the arguments; the language must have an edition."""
    if "--lang" not in args:
        return None, args
    i = args.index("--lang")
    if i + 1 >= len(args):
        session.error("--lang needs a language, e.g. --lang zh_CN")
    lang = args[i + 1]
    import importlib.util  # the module alone: the package needs Sphinx, which nox itself lacks

    spec = importlib.util.spec_from_file_location(
        "translations", ROOT / "conf" / "_ext" / "infralens_book" / "translations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if lang not in module.TRANSLATED:
        session.error(f"no edition in {lang!r}: the editions are {', '.join(sorted(module.TRANSLATED))}")
    return lang, args[:i] + args[i + 2:] + ["-D", f"language={lang}"]


@nox.session
def html(session: nox.Session) -> None:
    """Build the HTML book (incremental; `nox -s html -- -E` re-reads every page). `-- --open` opens it;
    `-- --lang zh_CN` builds the Chinese edition into _build/html/zh_CN."""
    python = _book_python(session)
    lang, args = _edition(session, [a for a in session.posargs if a != "--open"])
    out = BUILD / "html" / lang if lang else BUILD / "html"
    _sphinx(session, python, "html", out, *args)
    index = out / "index.html"
    print(f"The book: {index}")
    if "--open" in session.posargs:
        import webbrowser

        webbrowser.open(index.as_uri())


@nox.session
def pdf(session: nox.Session) -> None:
    """Build the PDF with xelatex (needs TeX: see README)."""
    missing = [tool for tool in ("xelatex", "latexmk") if shutil.which(tool) is None]
    if missing:
        session.error(
            f"{' and '.join(missing)} not found: install TeX with `sudo apt-get install "
            "--no-install-recommends latexmk texlive-xetex texlive-latex-extra "
            "texlive-fonts-recommended fonts-freefont-otf tex-gyre`"
        )
    lang, args = _edition(session, list(session.posargs))
    if lang and lang.startswith("zh"):
        fonts = ""
        if shutil.which("fc-list"):
            fonts = subprocess.run(["fc-list"], capture_output=True, text=True).stdout
        xecjk = shutil.which("kpsewhich") is not None and subprocess.run(
            ["kpsewhich", "xeCJK.sty"], capture_output=True).returncode == 0
        if "Noto Serif CJK SC" not in fonts or not xecjk:
            session.error("the Chinese PDF needs xeCJK and the Noto CJK fonts: "
                          "`sudo apt-get install texlive-lang-chinese fonts-noto-cjk`")
    python = _book_python(session)
    out = BUILD / (f"latex-{lang}" if lang else "latex")
    _sphinx(session, python, "latex", out, *args)
    session.run("make", "-C", str(out), "LATEXMKOPTS=-interaction=nonstopmode -halt-on-error",
                "all-pdf", external=True, silent=True)
    session.run(python, "-m", "infralens_book", "latex-log", str(out), external=True,
                env={"PYTHONPATH": str(ROOT / "conf" / "_ext")})
    print(f"The PDF: {out / 'infralens.pdf'}")


@nox.session
def catalogs(session: nox.Session) -> None:
    """Refresh the translation catalogs from the English pages, then list what needs a translator:
    new messages (untranslated) and changed ones (fuzzy: the old translation is kept but not shown)."""
    python = _book_python(session)
    env = {"PYTHONPATH": str(ROOT / "conf" / "_ext")}
    session.run(python, "-m", "infralens_book", "catalogs", "update", external=True, env=env)
    session.run(python, "-m", "infralens_book", "catalogs", "check", external=True, env=env,
                success_codes=[0, 1])


@nox.session
def tests(session: nox.Session) -> None:
    """pytest over src and the book's own checks (anchors, annotations, GPU cells, a clean build)."""
    python = _book_python(session)
    session.run(python, "-m", "pytest", *session.posargs, external=True)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over src, tests, conf and this file, and over the code cells of every page."""
    python = _book_python(session)
    session.run(python, "-m", "ruff", "check", "src", "tests", "conf", "noxfile.py", external=True)
    session.run(python, "-m", "infralens_book", "lint-cells", external=True,
                env={"PYTHONPATH": str(ROOT / "conf" / "_ext")})


@nox.session
def gpu(session: nox.Session) -> None:
    """Run every GPU cell with this machine's CUDA PyTorch and write the records into book/_records.

    Nothing is installed: the cells use the PyTorch and Triton of the active `python3` (or of
    INFRALENS_GPU_PYTHON), with src/ on PYTHONPATH. This wraps `python -m infralens.tools.cells run`,
    which is all a CUDA machine without nox needs.
    """
    python = os.environ.get("INFRALENS_GPU_PYTHON") or shutil.which("python3") or sys.executable
    env = {"PYTHONPATH": str(ROOT / "src")}
    check = subprocess.run([python, "-m", "infralens.tools.cells", "check-cuda"], capture_output=True,
                           text=True, env={**os.environ, **env})
    if check.returncode != 0:
        session.error(check.stderr.strip().removeprefix("infralens.tools.cells: error: "))
    session.run(python, "-m", "infralens.tools.cells", "run", *session.posargs, external=True, env=env)
