"""The print edition (LaTeX, then PDF): what a printed book needs that the web book does not.

- Parts: each captioned toctree of the root page becomes a ``\\part`` (Start here, Handbook,
  Labs, ...), so the contents are grouped as on the web; the root page's own text, written for
  the web, is left out, and no caption is taken for the contents heading.
- Cards (sphinx-design grids of cards, made for the screen) print as a definition list: the
  card's title, then its text.
- Setup code: cells tagged ``hide-input`` (or ``remove-input``) print their output only, as the
  web page shows them folded.
- Labels: each labelled section prints its label (``§lab01-kv-cache``) under its heading, the
  address the book asks readers to cite. The bibliography page's own text is left out: LaTeX
  prints the list of references at the end of the book.
- Answers at the end: exercise solutions and interview model answers move from under their
  questions to a section at the end of their page, each titled with what it answers. Each
  exercise also gets the label its solution's title links back to (sphinx-exercise labels it
  ``exercise:<label>`` in LaTeX, but the title links to ``<page>:<label>``).
"""

from __future__ import annotations

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

HIDDEN_INPUT = {"tag_hide-input", "tag_remove-input"}
BIBLIOGRAPHY = "back/bibliography"
NO_LABEL = ("genindex", "search", "modindex", "py-modindex", "home")
EXERCISES = {"exercise_node", "exercise_enumerable_node"}  # sphinx-exercise's node classes


def _latex(app: Sphinx) -> bool:
    return app.builder is not None and app.builder.format == "latex"


def parts_from_captions(app: Sphinx, doctree: nodes.document) -> None:
    """Root page, LaTeX only: ``\\part{caption}`` before each captioned toctree; other text out."""
    if not _latex(app) or app.env.docname != app.config.root_doc:
        return
    top = next(iter(doctree.findall(nodes.section)), None)
    if top is None:
        return
    kept: list[nodes.Node] = [top[0]]  # the title (the document title, not printed as a chapter)
    for wrapper in top[1:]:
        toctrees = list(wrapper.findall(addnodes.toctree))
        if not toctrees:
            continue
        caption = toctrees[0].get("caption")
        if caption:
            kept.append(nodes.raw("", f"\\part{{{caption}}}\n", format="latex"))
            del toctrees[0]["caption"]
        kept.append(wrapper)
    top.children = []
    top.extend(kept)


def _component(name: str):
    return lambda node: isinstance(node, nodes.container) and node.get("design_component") == name


def cards_as_lists(app: Sphinx, doctree: nodes.document) -> None:
    """LaTeX only: each grid of cards (or lone card) becomes a definition list."""
    if not _latex(app):
        return
    for block in list(doctree.findall(lambda n: _component("grid-container")(n) or (
            _component("card")(n) and not any(_component("grid-container")(a) for a in _ancestors(n))))):
        items = nodes.definition_list()
        for card in block.findall(_component("card")):
            title = next(card.findall(_component("card-title")), None)
            body = next(card.findall(_component("card-body")), card)
            term = nodes.term("", "", nodes.strong("", title.astext() if title else ""))
            text = [c.deepcopy() for c in body.children if c is not title]
            items += nodes.definition_list_item("", term, nodes.definition("", *text))
        block.replace_self(items)


def bibliography_as_list(app: Sphinx, doctree: nodes.document) -> None:
    """LaTeX only: the bibliography page keeps its references (LaTeX gathers them at the end of
    the book) and drops its heading and text, which would print as an empty chapter."""
    if not _latex(app) or app.env.docname != BIBLIOGRAPHY:
        return
    top = next(iter(doctree.findall(nodes.section)), None)
    if top is not None:
        keep = [c for c in top.children if not isinstance(c, (nodes.title, nodes.paragraph, nodes.target))]
        top.replace_self(keep)


def print_labels(app: Sphinx, doctree: nodes.document) -> None:
    """Under each labelled section's heading, its label in small type."""
    by_id = {(doc, labelid): label for label, (doc, labelid, sectname)
             in app.env.domaindata["std"]["labels"].items() if sectname and label not in NO_LABEL}
    for sof, _ in _page_sections(doctree):
        for section in sof.findall(nodes.section):
            label = next((by_id[(sof["docname"], i)] for i in section["ids"] if (sof["docname"], i) in by_id),
                         None)
            if label and isinstance(section[0], nodes.title):
                section.insert(1, nodes.raw("", f"\\par{{\\footnotesize\\sffamily §{label}}}\\par\n",
                                            format="latex"))


def _page_sections(doctree: nodes.document):
    """(page, its top section) for every page inlined into the LaTeX document."""
    for sof in doctree.findall(addnodes.start_of_file):
        top = next((c for c in sof.children if isinstance(c, nodes.section)), None)
        if top is not None:
            yield sof, top


def drop_hidden_sources(doctree: nodes.document) -> None:
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") == "cell_code" and HIDDEN_INPUT & set(cell["classes"]):
            for part in [c for c in cell.children if c.get("nb_element") == "cell_code_source"]:
                cell.remove(part)


def _is_answer(node: nodes.Node) -> bool:
    if type(node).__name__ == "solution_node":
        return True
    if isinstance(node, nodes.container) and node.get("design_component") == "dropdown":
        return True
    return False


def _title_of_answer(node: nodes.Element) -> str:
    section = node.parent
    while section is not None and not isinstance(section, nodes.section):
        section = section.parent
    heading = section[0].astext() if section is not None else ""
    return f"Model answer: {heading}" if heading else "Model answer"


def label_exercises(doctree: nodes.document) -> None:
    for sof, _ in _page_sections(doctree):
        for exercise in list(sof.findall(lambda n: type(n).__name__ in EXERCISES)):
            if exercise.get("label"):
                target = f"{sof['docname']}:{exercise['label']}"
                exercise.parent.insert(exercise.parent.index(exercise), nodes.raw(
                    "", f"\\phantomsection\\label{{\\detokenize{{{target}}}}}%\n", format="latex"))


def answers_at_page_end(doctree: nodes.document) -> None:
    for sof, top in _page_sections(doctree):
        answers = [n for n in sof.findall(_is_answer)
                   if not any(_is_answer(a) for a in _ancestors(n))]
        if not answers:
            continue
        page = sof["docname"].replace("/", "-")
        end = nodes.section(ids=[f"{page}-answers"])
        end += nodes.title("", "Answers")
        for answer in answers:
            answer.parent.remove(answer)
            if type(answer).__name__ == "solution_node":  # keeps its title and its label
                end += answer
                continue
            block = nodes.section(ids=[f"{page}-answer-{len(end.children)}"])
            block += nodes.title("", _title_of_answer(answer))
            block.extend(c for c in answer.children if type(c).__name__ != "dropdown_title")
            end += block
        top += end


def _ancestors(node: nodes.Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def shape_for_print(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """LaTeX only, on the assembled book: drop folded setup code, move answers to page ends."""
    if not _latex(app) or docname != app.config.root_doc:
        return
    drop_hidden_sources(doctree)
    print_labels(app, doctree)
    label_exercises(doctree)
    answers_at_page_end(doctree)


def setup(app: Sphinx) -> None:
    app.connect("doctree-read", parts_from_captions)
    app.connect("doctree-read", cards_as_lists)
    app.connect("doctree-read", bibliography_as_list)
    app.connect("doctree-resolved", shape_for_print)
