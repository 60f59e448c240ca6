"""The GPU machine's page parser against myst-nb's own reader, on pages written for the test."""

from __future__ import annotations

import pytest

from infralens.tools.cells import parse

TOP = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  name: python3
---
"""

PAGE = TOP + """
# A page

Text with `inline` code and a fence that is not a cell:

```python
not_a_cell = True
```

```{code-cell} ipython3
x = 1
```

````{note}
An admonition with a fence inside (a code-cell may not be nested: the build refuses it).

```python
inside = True
```
````

```{code-cell} ipython3
:tags: [gpu]
:record: demo-options
y = 2
```

```{code-cell} ipython3
---
tags: [hide-input, gpu]
record: demo-yaml
---
z = 3

print(z)
```

~~~{code-cell} ipython3
:tags: [remove-cell]
w = "~~~"
~~~
"""


def test_cells_agree_with_myst_nb():
    from myst_nb.core.read import read_myst_markdown_notebook

    ours = parse.parse_cells(PAGE, "labs/demo")
    theirs = [c for c in read_myst_markdown_notebook(PAGE).cells if c.cell_type == "code"]
    assert [c.source for c in ours] == [c.source for c in theirs]
    assert [c.tags for c in ours] == [list(c.metadata.get("tags", [])) for c in theirs]
    assert [c.record for c in ours] == [c.metadata.get("record") for c in theirs]


def test_cell_fields():
    cells = parse.parse_cells(PAGE, "labs/demo")
    assert [c.index for c in cells] == [0, 1, 2, 3] and {c.page for c in cells} == {"labs/demo"}
    lines = PAGE.splitlines()
    assert all(lines[c.line - 1].lstrip().startswith(("```{code-cell}", "~~~{code-cell}")) for c in cells)
    assert [c.is_gpu for c in cells] == [False, True, True, False]
    assert [c.record for c in cells] == [None, "demo-options", "demo-yaml", None]
    assert cells[2].source == "z = 3\n\nprint(z)" and cells[3].source == 'w = "~~~"'


def test_directives_finds_other_directives_with_their_argument_and_body():
    found = parse.directives(PAGE, "note")
    assert len(found) == 1 and found[0].argument == "" and found[0].line == PAGE.splitlines().index(
        "````{note}") + 1
    assert found[0].body.startswith("An admonition with a fence") and "inside = True" in found[0].body
    fig = parse.directives("```{figure} img.png\n:name: fig-x\n:width: 80%\nThe caption.\n```\n", "figure")
    assert fig == [parse.Directive("figure", 1, "img.png", {"name": "fig-x", "width": "80%"}, "The caption.")]


def test_unterminated_option_block_is_an_error():
    with pytest.raises(ValueError, match="unterminated '---' option block"):
        parse.parse_cells("```{code-cell} ipython3\n---\ntags: [gpu]\nx = 1\n```\n")


@pytest.mark.parametrize("text, expected", [
    (PAGE, True),
    ("---\nfile_format: mystnb\n---\n# page\n", True),
    ("---\njupytext:\n  text_representation:\n    format_name: markdown\n---\n", False),
    ("# no top matter\n", False),
    ("---\nunterminated: top matter\n", False),
    ("---\n: not yaml: [\n---\n", False),
])
def test_is_notebook(text, expected):
    assert parse.is_notebook(text) is expected


def test_book_pages_and_gpu_cells_of_a_book_folder(tmp_path):
    book = tmp_path / "book"
    ch02 = TOP + "\n```{code-cell} ipython3\n:tags: [gpu]\n:record: ch02-x\nrun()\n```\n"
    for rel, text in {"labs/demo.md": PAGE, "index.md": "# not a notebook\n", "handbook/ch02.md": ch02,
                      "_build/copy.md": PAGE, ".hidden/copy.md": PAGE, "labs/_drafts/copy.md": PAGE}.items():
        (book / rel).parent.mkdir(parents=True, exist_ok=True)
        (book / rel).write_text(text)
    assert parse.book_pages(book) == [book / "handbook/ch02.md", book / "labs/demo.md"]
    cells = parse.gpu_cells(book)
    assert [(c.page, c.record) for c in cells] == [("handbook/ch02", "ch02-x"), ("labs/demo", "demo-options"),
                                                   ("labs/demo", "demo-yaml")]
