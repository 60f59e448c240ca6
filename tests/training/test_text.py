"""The standard-library corpus: byte-exact contents, a split by file that never mixes, the files it
skips, and one clear error when there are too few bytes."""

from __future__ import annotations

import pytest

from infralens.training import text


def _tree(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_files_skip_packages_and_test_suites_and_are_sorted(tmp_path):
    _tree(tmp_path, {"b.py": b"b", "a/x.py": b"x", "test/t.py": b"t", "site-packages/p/q.py": b"q",
                     "a/tests/u.py": b"u", "a/notes.txt": b"n"})
    names = [p.relative_to(tmp_path).as_posix() for p in text.stdlib_files(tmp_path)]
    assert names == ["a/x.py", "b.py"]


def test_corpus_is_the_files_bytes_split_by_file(tmp_path):
    files = {f"m{i:02d}.py": bytes([65 + i]) * (50 + i) for i in range(40)}
    _tree(tmp_path, files)
    held = {rel for rel in files if text._held_out(rel, 4)}
    assert 0 < len(held) < len(files)                         # both sides have files
    train_bytes = b"".join(files[r] for r in sorted(files) if r not in held)
    held_bytes = b"".join(files[r] for r in sorted(files) if r in held)
    c = text.stdlib_corpus(len(train_bytes) - 7, len(held_bytes) - 3, held_out_every=4, root=tmp_path)
    assert bytes(c.train.tolist()) == train_bytes[:-7]
    assert bytes(c.held_out.tolist()) == held_bytes[:-3]
    assert set(c.train.tolist()).isdisjoint(c.held_out.tolist())   # one byte value per file
    assert (c.files, c.held_out_files) == (len(files) - len(held), len(held))
    assert c.train.dtype == c.held_out.dtype and int(c.train.max()) < text.BYTE_VOCAB


def test_too_little_text_is_one_clear_error(tmp_path):
    _tree(tmp_path, {"a.py": b"x" * 10})
    with pytest.raises(ValueError, match="has only"):
        text.stdlib_corpus(1000, 1, held_out_every=1, root=tmp_path)
    with pytest.raises(ValueError, match="train_bytes must be a positive integer"):
        text.stdlib_corpus(0, 1, root=tmp_path)


def test_this_interpreters_library_gives_python_source():
    c = text.stdlib_corpus(20_000, 2_000)
    assert len(c.train) == 20_000 and len(c.held_out) == 2_000
    source = bytes(c.train.tolist()).decode("utf-8", errors="replace")
    assert "def " in source and "import " in source
