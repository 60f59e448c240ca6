"""The clean build of the whole book that the `build` tests read (built once per session).

INFRALENS_SITE=<folder> points the tests at a site already built there instead (for example
`_build/html` after `nox -s html -- -E`), which saves the build while working on a check.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    if os.environ.get("INFRALENS_SITE"):
        return Path(os.environ["INFRALENS_SITE"]).resolve()
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
    # each translated edition beside it, as `nox -s html -- --lang L` places it (outputs come from
    # the same execution cache)
    sys.path.insert(0, str(ROOT / "conf" / "_ext"))
    from infralens_book.translations import TRANSLATED

    for lang in TRANSLATED:
        done = subprocess.run(
            [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-E", "-q",
             "-D", f"language={lang}", "-c", str(ROOT / "conf"), "-d", str(out / f".doctrees-{lang}"),
             str(ROOT / "book"), str(out / lang)],
            capture_output=True, text=True, cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr[-5000:]
        assert not re.search(r"\b(WARNING|ERROR): ", done.stderr), done.stderr[-5000:]
    return out
