"""tests/ mirrors src/infralens one to one: ``<pkg>/<mod>.py`` is tested by ``tests/<pkg>/test_<mod>.py``.

``__main__.py`` is tested by ``test_main.py``; ``__init__.py`` files have no test module of their own.
Exempt: this file, and tests/book/ (it tests the book, not a module). Helper files (conftest.py,
fakes, data) may sit next to the tests that use them. Test folders are packages, so that two
``test_main.py`` (or ``test_flops.py``) in different folders do not collide.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "infralens"
TESTS = ROOT / "tests"


def expected_test(module: Path) -> Path:
    """The test module of a src module."""
    rel = module.relative_to(SRC)
    stem = "main" if rel.stem == "__main__" else rel.stem
    return TESTS / rel.parent / f"test_{stem}.py"


def modules_named_by(test: Path) -> list[Path]:
    """The src modules a test module may stand for (test_main.py: __main__.py, or a main.py)."""
    rel = test.relative_to(TESTS)
    name = rel.stem.removeprefix("test_")
    candidates = [SRC / rel.parent / f"{name}.py"]
    if name == "main":
        candidates.append(SRC / rel.parent / "__main__.py")
    return candidates


def src_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py")
                  if p.name != "__init__.py" and "__pycache__" not in p.parts)


def mirrored_tests() -> list[Path]:
    """Every test module of tests/ except this one and the book's."""
    return sorted(p for p in TESTS.rglob("test_*.py")
                  if p != Path(__file__).resolve() and p.relative_to(TESTS).parts[0] != "book"
                  and "__pycache__" not in p.parts)


def test_every_src_module_has_its_test_module():
    missing = [str(expected_test(m).relative_to(ROOT)) for m in src_modules()
               if not expected_test(m).is_file()]
    assert not missing, f"src modules without a test module: {missing}"


def test_every_test_module_names_a_src_module():
    orphans = [str(t.relative_to(ROOT)) for t in mirrored_tests()
               if not any(c.is_file() for c in modules_named_by(t))]
    assert not orphans, f"test modules that name no module of src/infralens: {orphans}"


def test_test_folders_are_packages():
    folders = sorted({t.parent for t in mirrored_tests()} | {TESTS})
    missing = [str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()]
    assert not missing, f"test folders without __init__.py (same-named modules would collide): {missing}"


def test_the_mirror_is_found_at_all():
    # guards the checks above against a wrong root (nothing found, so nothing missing)
    assert len(src_modules()) > 50 and len(mirrored_tests()) == len(src_modules())
    assert expected_test(SRC / "tools" / "cells" / "parse.py") == TESTS / "tools" / "cells" / "test_parse.py"
    assert expected_test(SRC / "kernels" / "__main__.py") == TESTS / "kernels" / "test_main.py"
    assert SRC / "kernels" / "__main__.py" in modules_named_by(TESTS / "kernels" / "test_main.py")
