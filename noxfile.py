"""InfraLens build and test sessions.

    nox -s html     build the web book into _build/html (CPU cells executed, warnings are errors)
    nox -s pdf      build the PDF with xelatex into _build/latex/infralens.pdf
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


@nox.session
def html(session: nox.Session) -> None:
    """Build the HTML book (incremental; `nox -s html -- -E` re-reads every page). `-- --open` opens it."""
    python = _book_python(session)
    args = [a for a in session.posargs if a != "--open"]
    _sphinx(session, python, "html", BUILD / "html", *args)
    index = BUILD / "html" / "index.html"
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
    python = _book_python(session)
    _sphinx(session, python, "latex", BUILD / "latex", *session.posargs)
    session.run("make", "-C", str(BUILD / "latex"), "LATEXMKOPTS=-interaction=nonstopmode -halt-on-error",
                "all-pdf", external=True, silent=True)
    session.run(python, "-m", "infralens_book", "latex-log", str(BUILD / "latex"), external=True,
                env={"PYTHONPATH": str(ROOT / "conf" / "_ext")})
    print(f"The PDF: {BUILD / 'latex' / 'infralens.pdf'}")


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
