"""Interventions' presenter: a Contrast (two prompts of T tokens and their logit differences), PatchGrids (restored,
values: R × K, a row per layer, a column per position or head) and an Ablation (the top k next tokens before and
after) with the view's settings -> the patched grid and the equation of its highlighted cell, a second model's grid
and the difference, attribution patching's estimate beside the exact grid with their agreement, and the ablation's
bars; what to notice on this pair."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import plotly.graph_objects as go

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes import interventions as I
from explorer.probes.interventions import Ablation, Contrast, FirstPatches, PatchGrid
from explorer.text.escape import md
from explorer.viz import interventions as V
from explorer.viz.theme import Theme

FOLD = 390  # the grids' height in the first screen (projector pixels)
DIRECTIONS = {"denoise": "denoise", "noise": "noise"}  # short: the grid's title says which run gets which
METHODS = {"exact": "exact", "attribution": "estimate", "both": "both"}  # short: whole at 20 px
RECURRENCE = {"fwd": "forward", "bwd": "backward"}
RANGES = {"1": "−1 to 1", "fit": "fit to the grid"}


GridFigure = Callable[[PatchGrid, Sequence[str], str, Theme, tuple[int, int] | None, float], go.Figure]


class Builds(Protocol):
    """How the grid's figure is built: now, or by a page's cache of figures (explorer.ui.cache.figure_of)."""

    def __call__(self, build: GridFigure, grid: PatchGrid, labels: Sequence[str], title: str, theme: Theme,
                 selected: tuple[int, int] | None, scale: float, /) -> go.Figure: ...


def built(build: GridFigure, grid: PatchGrid, labels: Sequence[str], title: str, theme: Theme,
          selected: tuple[int, int] | None, scale: float, /) -> go.Figure:
    """The figure, built now (the notebook's way)."""
    return build(grid, labels, title, theme, selected, scale)


def position_label(tokens: tuple[str, ...], t: int) -> str:
    return "every position" if t < 0 else f"position {t}: {tokens[t]}"


def ablation_label(how: str) -> str:
    return f"{how} ablation"


def said(contrast: Contrast, p: Presentation | None = None) -> Presentation:
    """What the contrast's runs said about the two prompts (cut, unknown words, where the metric is read)."""
    p = Presentation() if p is None else p
    p.say("note", *contrast.notes)
    return p


def columns(grid: PatchGrid, contrast: Contrast) -> list[str]:
    """The grid's column labels: heads, or positions as the clean token ("clean/corrupted" where they differ)."""
    return V.columns(grid, contrast.corrupt_tokens)


def shown(exact: PatchGrid | None, estimates: dict[str, PatchGrid] | None, site: str) -> PatchGrid:
    """The grid the view draws: the exact one when it was computed, else attribution patching's estimate."""
    return exact if exact is not None else (estimates or {})[site]


def title(grid: PatchGrid, site: str, direction: str, method: str) -> str:
    return (f"{'Denoising' if direction == 'denoise' else 'Noising'}: {I.KINDS[site]} restored"
            + (f" ({grid.method})" if method == "both" else ""))


def so_far(grid: PatchGrid, estimate: PatchGrid, contrast: Contrast, site: str, theme: Theme) -> Presentation:
    """The grid while exact patching runs (`grid`: the rows computed so far): attribution patching's estimate at
    once, its rows replaced by the exact ones as they are computed ("patch_so_far")."""
    p = Presentation()
    filled = I.fill_in(grid, estimate)
    done, rows = I.rows_done(grid), len(grid.rows)
    p.figure("patch_so_far", V.restored_grid(filled, columns(filled, contrast),
                                             f"{I.KINDS[site]}: {done} of {rows} rows exact, the rest estimated",
                                             theme),
             Origin("model", f"{md(contrast.model_id)}'s own logits: {done} of {rows} rows patched exactly; the others "
                             "estimated by attribution patching until their runs are done"), "interventions")
    return p


def patched(contrast: Contrast, grid: PatchGrid, site: str, direction: str, method: str, cell: tuple[int, int],
            span: str, theme: Theme, build: Builds = built, p: Presentation | None = None) -> Presentation:
    """The grid ("patch_grid") with `cell` (row, column) outlined, on the colour range `span` ("1" or "fit")."""
    p = Presentation() if p is None else p
    computed = (f"{grid.runs} patched runs in {grid.seconds:.2f} s" if grid.method == "exact" else
                "estimated by attribution patching")
    p.figure("patch_grid", build(V.restored_grid, grid, columns(grid, contrast),
                                 title(grid, site, direction, method), theme, cell, V.colour_range(grid, span)),
             Origin("model", f"{md(contrast.model_id)}'s own logits, its {I.KINDS[site]} patched: {computed}"),
             "interventions")
    return p


def equation(contrast: Contrast, grid: PatchGrid, direction: str, cell: tuple[int, int],
             p: Presentation | None = None) -> Presentation:
    """The restored fraction of the highlighted cell from the three logit differences, and what they are."""
    p = Presentation() if p is None else p
    row, col = cell
    ld_cell = float(grid.values[row, col])
    clean, corrupted = contrast.clean, contrast.corrupted
    p.say("latex", r"\text{restored} = \frac{LD_\text{patched} - LD_\text{corrupted}}{LD_\text{clean} - "
                   rf"LD_\text{{corrupted}}}} = \frac{{{ld_cell:.3f} - ({corrupted.ld:.3f})}}"
                   rf"{{{clean.ld:.3f} - ({corrupted.ld:.3f})}} = {float(grid.restored[row, col]):.3f}")
    run = "corrupted" if direction == "denoise" else "clean"
    pp = grid.probabilities(row, col)
    p.say("caption",
          f"LD = logit(“{contrast.answer}”) − logit(“{contrast.wrong}”) {contrast.reads}. Clean: {clean.ld:.3f} (p = "
          f"{clean.p_answer:.3f} and {clean.p_wrong:.3f}); corrupted: {corrupted.ld:.3f} (p = "
          f"{corrupted.p_answer:.3f} and {corrupted.p_wrong:.3f}). The highlighted cell, {grid.rows[row]} at "
          f"{columns(grid, contrast)[col]}: the {run} run with "
          f"{'this' if grid.method == 'exact' else 'an estimate of this'} one activation from the other run gives LD "
          f"{ld_cell:.3f}" + ("" if pp is None else f" (p = {pp[0]:.3f} and {pp[1]:.3f})") + f". {V.rows_note(grid)}")
    return p


def compared(contrast: Contrast, grid: PatchGrid, grid_b: PatchGrid, other_id: str, site: str, direction: str,
             method: str, cell: tuple[int, int], span: str, theme: Theme,
             p: Presentation | None = None) -> Presentation:
    """A second model's grid of the same site, direction and method on the first grid's colour range
    ("patch_grid_b"), and where the two have the same rows and columns their difference ("patch_grid_diff")."""
    p = Presentation() if p is None else p
    same = grid_b.restored.shape == grid.restored.shape and grid_b.rows == grid.rows
    scale = V.colour_range(grid, span)
    p.figure("patch_grid_b", V.restored_grid(grid_b, columns(grid_b, contrast),
                                             f"{other_id}: {title(grid, site, direction, method)}", theme,
                                             cell if same else None, scale),
             Origin("model", f"{md(other_id)}'s own logits, its {I.KINDS[site]} patched ({grid_b.method})"),
             "interventions-compare")
    if same:
        row, col = cell
        p.figure("patch_grid_diff", V.difference_grid(grid, grid_b, columns(grid, contrast),
                                                      (contrast.model_id, other_id), theme),
                 Origin("model", "the difference of the two models' own restored fractions, cell by cell"),
                 "interventions-difference")
        p.say("caption", f"Both grids on one colour scale (±{scale:g}). At the highlighted cell {other_id} restores "
                         f"{float(grid_b.restored[row, col]):.3f} against {contrast.model_id}'s "
                         f"{float(grid.restored[row, col]):.3f}.")
    else:
        R, K = grid.restored.shape
        p.say("note", f"No difference is drawn: {other_id}'s grid has other rows or columns "
                      f"({grid_b.restored.shape[0]} × {grid_b.restored.shape[1]} against {R} × {K}).")
    return p


def estimated(contrast: Contrast, exact: PatchGrid, estimate: PatchGrid, cell: tuple[int, int], span: str,
              theme: Theme, p: Presentation | None = None) -> Presentation:
    """Attribution patching's estimate of the exact grid ("patch_estimate"), how well it holds, and the two cell by
    cell ("patch_scatter")."""
    p = Presentation() if p is None else p
    labels = columns(exact, contrast)
    agree = I.agreement(exact, estimate)
    R, K = exact.restored.shape
    p.figure("patch_estimate", V.restored_grid(estimate, labels, "Attribution patching's estimate of the same grid",
                                               theme, cell, V.colour_range(exact, span)),
             Origin("model", f"gradients of {md(contrast.model_id)}'s own logit difference (autograd) times the "
                             f"activations' differences; {estimate.seconds:.2f} s for every grid"),
             "interventions-attribution")
    p.say("line", f"How well the estimate holds here: Pearson r = {agree.r:.3f} over the {R * K} cells; the largest "
                  f"gap is at {agree.worst_row}, {agree.worst_col}: exact {agree.exact:.3f}, estimate "
                  f"{agree.estimate:.3f}.")
    p.figure("patch_scatter", V.exact_vs_estimate(exact, estimate, labels, theme),
             Origin("model", "the two grids above, cell by cell"), "interventions-agreement")
    return p


def ablated(ablation: Ablation, model_id: str, theme: Theme, p: Presentation | None = None) -> Presentation:
    """The next tokens (or labels) of the clean prompt with and without the ablation ("ablation")."""
    p = Presentation() if p is None else p
    p.say("note", *ablation.notes)
    p.figure("ablation", V.ablation_bars(ablation, theme),
             Origin("model", f"{md(model_id)}'s own probabilities of the {ablation.outputs}, with and without the "
                             "ablation"), "interventions-ablation")
    if ablation.components:
        change = "" if ablation.before is None or ablation.after is None else (
            f" The logit difference goes from {ablation.before.ld:.3f} to {ablation.after.ld:.3f}.")
        p.say("caption", f"{ablation.before_tokens[0]} had p = {ablation.before_probs[0]:.4f}; after the ablation "
                         f"p = {ablation.top_after:.4f}.{change}")
    else:
        p.say("caption", "Choose heads, MLP layers or recurrent units above to ablate them in the clean run.")
    return p


def present(contrast: Contrast, grid: PatchGrid, site: str, direction: str, method: str, cell: tuple[int, int],
            span: str, ablation: Ablation, theme: Theme, estimate: PatchGrid | None = None,
            other: tuple[str, PatchGrid] | None = None) -> Presentation:
    """The whole view in the page's order: the contrast's notes, the grid (see patched) and its cell's equation, a
    second model's grid (`other`: its id and grid), the estimate beside the exact grid (`estimate`, method "both"),
    and the ablation."""
    p = said(contrast)
    patched(contrast, grid, site, direction, method, cell, span, theme, p=p)
    equation(contrast, grid, direction, cell, p)
    if other is not None:
        compared(contrast, grid, other[1], other[0], site, direction, method, cell, span, theme, p)
    if estimate is not None:
        estimated(contrast, grid, estimate, cell, span, theme, p)
    p.heading("Ablation")
    return ablated(ablation, contrast.model_id, theme, p)


def quotes_shown(exact: PatchGrid | None, recurrent: bool, rdir: str) -> bool:
    """Whether what to notice reads the grid on screen (a decoder's, or a recurrent model's exact forward denoising
    of h); else it needs a recurrent model's forward h denoised (a few runs)."""
    return not recurrent or (exact is not None and exact.kind == "h" and exact.direction == "denoise"
                             and rdir == "fwd")


def notices(first: FirstPatches | None, recurrent: bool, has_cell: bool) -> list[str]:
    """What to notice: the first point computed on this pair (`first`: interventions.first_patches; None: no pair
    to patch), then how to read the grids."""
    points = [] if first is None else first_patch_points(first, recurrent, has_cell)
    if not recurrent:
        points.append("Read the residual grid from the bottom: which positions carry the difference in the early "
                      "layers, and at which layer it has moved to the last position, where the next token is read "
                      "out.")
    return [*points,
            "Attribution patching costs two passes for every grid; where a patch changes the model a lot (often the "
            "first layers at the tokens that differ) the straight-line estimate can be far off: compare the two "
            "grids.",
            "Noising asks the opposite question: which activations the clean answer cannot do without."]


def first_patch_points(first: FirstPatches, recurrent: bool, has_cell: bool) -> list[str]:
    """What to notice about the first patches of a pair (interventions.first_patches): how many tokens differ, and
    what patching there restores (a transformer's residual stream before layer 0; a recurrent model's top-layer h).
    recurrent: a recurrent model's grid; has_cell: it has a cell state c."""
    n = len(first.differ)
    differ = (f"these prompts differ in {n} token{'s' if n != 1 else ''} ("
              + ", ".join(f"“{t}”" for t in first.tokens) + ")")
    if n and not recurrent:
        return [
            "Denoising the residual stream before layer 0 changes the input at one position only: where the prompts "
            "agree it restores 0" + ("" if first.at_agree is None else f" (here at most {first.at_agree:.1e})")
            + f"; {differ}"
            + (", so that one patch makes the input the clean prompt and restores 1" if n == 1 else
               f": each patch puts back one of them while the other {n - 1} stay corrupted, so none of them need "
               "restore 1")
            + ("" if first.at_differ is None else " (here " + ", ".join(f"{v:.6f}" if n == 1 else f"{v:.3f}"
                                                                     for v in first.at_differ) + ")")
            + "."]
    if n and first.at_differ is not None and not first.last_state:  # the head reads more than one state
        return [f"LD is taken {first.reads}: the head reads more than the forward top-layer state at the last "
                f"position, so patching that state alone need not restore 1 (here {first.last:.3f}); the forward top "
                f"layer's h restores most at “{first.best_at}” ({first.best:.3f}). "
                f"{differ[0].upper()}{differ[1:]}."]
    if n and first.at_differ is not None:
        return [
            f"Patching h of the top layer at the last position hands the output layer the clean state: it restores 1 "
            f"(here {first.last:.6f}). Before the first token that differs the two runs are the same: 0 (here at "
            f"most {first.at_agree:.1e}); {differ}, and from the first on one patch of h restores "
            f"{min(first.at_differ):.3f} to {max(first.at_differ):.3f}"
            + ("; the cell state c, still corrupted, carries the rest." if has_cell else ".")]
    return []
