"""What a view shows, built once for the page and the notebook: named figures and tables, each with its `Origin`
(what its numbers are), and the view's notes, warnings, captions, formulas and lines of text, as plain text (the page
escapes them for Markdown; a notebook prints them)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go


@dataclass(frozen=True)
class Origin:
    """What a panel's numbers are, shown as a badge above the panel.

    kind: "model" (read from this model's own run), "recomputed" (recomputed from its weights, equal to the run
    to the error stated in `detail`), "illustration" (a formula on chosen numbers, no model) or "file" (read from
    an uploaded file); detail: one sentence saying more (computed values, not constants)."""

    kind: str
    detail: str = ""


@dataclass(frozen=True)
class Panel:
    """A figure and what its numbers are; filename: the stem its download is saved under; overlay: a small figure
    whose traces are drawn on top of `figure` (e.g. typed words over a cached 30,000-point projection: the page
    converts only the overlay when it alone changes; the notebook returns the two merged)."""

    figure: go.Figure
    origin: Origin
    filename: str = "explorer"
    overlay: go.Figure | None = None


@dataclass(frozen=True)
class Numbers:
    """Numbers shown side by side, each with its label (st.metric): (label, value) pairs, in `columns` columns (0:
    one column per number; a single number then takes the whole width)."""

    pairs: tuple[tuple[str, str], ...]
    columns: int = 0


@dataclass(frozen=True)
class Table:
    """A table (column -> values) and what its numbers are."""

    data: Mapping[str, Sequence[object]]
    origin: Origin


Block = tuple[str, str]  # (kind, name or text): kind "figure", "table", "row" (figure names joined by "|"),
# "html" (a name in `markup`), "note", "warning", "caption", "latex", "line", "heading",
# "metrics" (a name in `numbers`: numbers side by side)


@dataclass
class Presentation:
    """A view's answer for one setting, in the order it is shown: `blocks` (kind, name or text); the named figures
    and tables. Kinds of text: note (about the input and what was inferred), warning (about the computation), caption
    (a live sentence under a chart), latex (a formula, KaTeX), line (a paragraph of the explanation). A "row" block
    puts figures side by side."""

    blocks: list[Block] = field(default_factory=list)
    figures: dict[str, Panel] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    markup: dict[str, str] = field(default_factory=dict)  # name -> HTML of an "html" block
    numbers: dict[str, Numbers] = field(default_factory=dict)  # name -> the numbers of a "metrics" block

    def figure(self, name: str, figure: go.Figure, origin: Origin, filename: str,
               overlay: go.Figure | None = None) -> None:
        self.figures[name] = Panel(figure, origin, filename, overlay)
        self.blocks.append(("figure", name))

    def row(self, *panels: tuple[str, go.Figure, Origin, str]) -> None:
        """Figures side by side (name, figure, origin, filename each)."""
        for name, fig, origin, filename in panels:
            self.figures[name] = Panel(fig, origin, filename)
        self.blocks.append(("row", "|".join(p[0] for p in panels)))

    def table(self, name: str, data: Mapping[str, Sequence[object]], origin: Origin) -> None:
        self.tables[name] = Table(data, origin)
        self.blocks.append(("table", name))

    def html(self, name: str, markup: str) -> None:
        """HTML made by a viz module, every text in it escaped there (e.g. tokens coloured by a value): the page
        shows it (st.html); a notebook finds it in `markup` by name. Not among texts()."""
        self.markup[name] = markup
        self.blocks.append(("html", name))

    def heading(self, text: str) -> None:
        """A section's title (plain text): a subheader on the page. Not among texts()."""
        self.blocks.append(("heading", text))

    def add(self, other: Presentation) -> Presentation:
        """`other`'s blocks, figures, tables, HTML and numbers after this one's (parts a page draws in two places,
        e.g. around a widget or in an expander, joined for the notebook); returns self."""
        self.blocks += other.blocks
        self.figures.update(other.figures)
        self.tables.update(other.tables)
        self.markup.update(other.markup)
        self.numbers.update(other.numbers)
        return self

    def metrics(self, name: str, *pairs: tuple[str, str], columns: int = 0) -> None:
        """Numbers side by side, (label, value) each (`Numbers`)."""
        self.numbers[name] = Numbers(pairs, columns)
        self.blocks.append(("metrics", name))

    def say(self, kind: str, *texts: str) -> None:
        """Text blocks of one kind: "note", "warning", "caption", "latex" or "line"."""
        assert kind in TEXT_KINDS, kind
        self.blocks += [(kind, t) for t in texts if t]

    def texts(self, *kinds: str) -> tuple[str, ...]:
        """The texts of the given kinds (all but formulas when none is given), in order."""
        want = kinds or tuple(k for k in TEXT_KINDS if k != "latex")
        return tuple(t for k, t in self.blocks if k in want)


TEXT_KINDS = ("note", "warning", "caption", "latex", "line")
