"""What a view shows, built once for the page and the notebook: named figures and tables, each with its `Origin`
(what its numbers are), and the view's notes, warnings, captions, formulas and lines of text, as plain text (the page
escapes them for Markdown; a notebook prints them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    """A figure and what its numbers are; filename: the stem its download is saved under."""

    figure: go.Figure
    origin: Origin
    filename: str = "explorer"


@dataclass(frozen=True)
class Table:
    """A table (column -> values) and what its numbers are."""

    data: dict[str, list[Any]]
    origin: Origin


Block = tuple[str, str]  # (kind, name or text): kind "figure", "table", "row" (figure names joined by "|"),
# "note", "warning", "caption", "latex", "line"


@dataclass
class Presentation:
    """A view's answer for one setting, in the order it is shown: `blocks` (kind, name or text); the named figures
    and tables. Kinds of text: note (about the input and what was inferred), warning (about the computation), caption
    (a live sentence under a chart), latex (a formula, KaTeX), line (a paragraph of the explanation). A "row" block
    puts figures side by side."""

    blocks: list[Block] = field(default_factory=list)
    figures: dict[str, Panel] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)

    def figure(self, name: str, figure: go.Figure, origin: Origin, filename: str) -> None:
        self.figures[name] = Panel(figure, origin, filename)
        self.blocks.append(("figure", name))

    def row(self, *panels: tuple[str, go.Figure, Origin, str]) -> None:
        """Figures side by side (name, figure, origin, filename each)."""
        for name, fig, origin, filename in panels:
            self.figures[name] = Panel(fig, origin, filename)
        self.blocks.append(("row", "|".join(p[0] for p in panels)))

    def table(self, name: str, data: dict[str, list[Any]], origin: Origin) -> None:
        self.tables[name] = Table(data, origin)
        self.blocks.append(("table", name))

    def say(self, kind: str, *texts: str) -> None:
        """Text blocks of one kind: "note", "warning", "caption", "latex" or "line"."""
        assert kind in TEXT_KINDS, kind
        self.blocks += [(kind, t) for t in texts if t]

    def texts(self, *kinds: str) -> tuple[str, ...]:
        """The texts of the given kinds (all but formulas when none is given), in order."""
        want = kinds or tuple(k for k in TEXT_KINDS if k != "latex")
        return tuple(t for k, t in self.blocks if k in want)


TEXT_KINDS = ("note", "warning", "caption", "latex", "line")
