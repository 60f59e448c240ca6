"""Book checks without a Sphinx build:

    python -m infralens_book anchors check|update   the anchor registry (conf/anchors.json)
    python -m infralens_book annotations            pinned emphasis of every literalinclude
    python -m infralens_book catalogs update|check  the translations' catalogs (conf/locales):
                                                    merge the English pages' messages in, or list
                                                    untranslated, fuzzy and broken entries
    python -m infralens_book latex-log DIR          the PDF's missing glyphs, undefined references
                                                    and overfull lines (over 5 pt)
    python -m infralens_book lint-cells             ruff over the code cells of every page
    python -m infralens_book page PAGE.md [...]     run one page's CPU cells; report failures,
                                                    stderr and glue keys no cell provides
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import anchors, annotated, latex_log

ROOT = Path(__file__).resolve().parents[3]
BOOK, REGISTRY = ROOT / "book", ROOT / "conf" / "anchors.json"


def annotation_problems(book: Path = BOOK) -> list[str]:
    from infralens.tools.cells.parse import directives

    problems = []
    for page in sorted(book.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in directives(text, "literalinclude"):
            arg = block.argument
            target = (book / arg.lstrip("/")) if arg.startswith("/") else page.parent / arg
            options = {k: str(v) if not isinstance(v, list) else v for k, v in block.options.items()}
            _, found = annotated.check(target, options)
            for problem in found:
                problems.append(f"{page.relative_to(book)}:{block.line}: {problem}")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["anchors"] and argv[1:] in (["check"], ["update"]):
        current, problems = anchors.collect(BOOK)
        if argv[1] == "update":
            anchors.update_registry(REGISTRY, current)
            print(f"registered {len(current)} anchors in {REGISTRY.relative_to(ROOT)}")
            problems = [p for p in problems]
        else:
            problems += anchors.compare(anchors.load_registry(REGISTRY), current)
    elif argv[:1] == ["catalogs"] and argv[1:] in (["update"], ["check"]):
        import tempfile

        from . import translations

        problems = []
        with tempfile.TemporaryDirectory() as tmp:
            translations.extract(Path(tmp))
            for lang, docs in translations.TRANSLATED.items():
                if argv[1] == "update":
                    written = translations.update(Path(tmp), lang, docs)
                    print(f"{lang}: {len(written)} catalogs updated")
                problems += [f"{lang}: {p}" for p in translations.problems(lang, docs, pot_dir=Path(tmp))]
        if argv[1] == "update":  # what a translator has to do next, without failing the update
            for problem in problems:
                print(problem)
            print(f"{len(problems)} entries need a translator")
            problems = []
    elif argv == ["annotations"]:
        problems = annotation_problems()
    elif argv == ["lint-cells"]:
        from .lint_cells import lint

        problems = lint()
    elif argv[:1] == ["page"] and len(argv) >= 2:
        from .page_check import check_page

        problems = []
        for name in argv[1:]:
            page = Path(name).resolve()
            if not page.is_file():
                problems.append(f"{name}: no such page")
                continue
            found, seconds = check_page(page)
            print(f"{name}: cells ran in {seconds:.1f} s, {len(found)} problem(s)")
            problems += [f"{name}: {p}" for p in found]
    elif argv[:1] == ["latex-log"] and len(argv) == 2:
        latex_dir = Path(argv[1])
        problems = ([f"missing character in the PDF: {m}" for m in latex_log.missing_characters(latex_dir)]
                    + [f"undefined in the PDF: {r}" for r in latex_log.undefined_references(latex_dir)]
                    + [f"overfull line in the PDF: {b}" for b in latex_log.overfull_boxes(latex_dir)])
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
