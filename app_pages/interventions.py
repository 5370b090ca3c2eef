"""Interventions: activation patching, attribution patching and ablation on a clean/corrupted pair of prompts."""
import streamlit as st

from explorer.data.examples import CONTRASTS
from explorer.probes import interventions as I
from explorer.text.escape import md, md_message
from explorer.ui import settings
from explorer.runtime.errors import ViewError
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.charts import Origin, caption, show
from explorer.ui.state import Controls
from explorer.ui.widgets import follow_preset, model_and_sentence, page_header, what_to_notice
from explorer.viz import interventions as V

c = Controls("interventions")
page_header("Interventions", "Where a model computes its answer: one prompt run with an activation taken from "
            "another (activation patching, Meng et al. 2022), its first-order estimate (attribution patching, Nanda "
            "2023), and ablations.")
_, loaded, text = model_and_sentence(c, label="Clean prompt")
follow_preset(CONTRASTS.get(text.strip()), ("corrupt", "answer", "wrong"))
c_corrupt, c_answer, c_wrong = st.columns([2.6, 1, 1], vertical_alignment="bottom")
with c_corrupt:
    corrupt = c.text_input("corrupt", max_chars=2000)
with c_answer:
    answer = c.text_input("answer", max_chars=200)
with c_wrong:
    wrong = c.text_input("wrong", max_chars=200)
layout = probe(I.layout, loaded)  # an InterventionError (a model this view cannot patch): shown, the page stops
args = (text, corrupt, answer, wrong)
contrast: I.Contrast | None
try:
    contrast = probe(I.contrast, loaded, *args, raising=True)
except I.InterventionError as exc:  # no pair to patch yet: the ablation below still reads the clean prompt
    st.info(md_message(exc))
    contrast = None
theme = settings.theme()

if contrast is not None:
    for note in contrast.notes:
        st.info(md_message(note))
    c_site, c_dir, c_method, c_cmp, c_more = st.columns([1.6, 1.0, 1.05, 1.5, 1.2], vertical_alignment="bottom")
    with c_cmp:
        other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
    with c_site:
        site = c.selectbox("site", list(layout.kinds), label_visibility="collapsed", format_func=I.KINDS.get)
    with c_dir:
        direction: str = c.selectbox("direction", label_visibility="collapsed", format_func={  # short: projector
            "denoise": "denoise", "noise": "noise"}.get)  # the grid's title says which run gets which
    with c_method:
        method: str = c.selectbox("method", label_visibility="collapsed", format_func={
            "exact": "exact", "attribution": "estimate", "both": "both"}.get)  # short: whole at 20 px
    T = len(contrast.tokens)
    with c_more, st.popover("Options", icon=":material/tune:", width="stretch"):
        pos = c.token("pos", contrast.tokens, -1, list(range(-1, T)), disabled=site != "heads",  # follows the prompt
                      format_func=lambda t: "every position" if t < 0 else f"position {t}: {contrast.tokens[t]}")
        rdir = c.radio("dir", list(layout.directions), format_func={"fwd": "forward", "bwd": "backward"}.get,
                       disabled=len(layout.directions) < 2)
        span: str = c.radio("range", format_func={"1": "−1 to 1", "fit": "fit to the grid"}.get, horizontal=True)
    drawn, corrupt_tokens = [0], contrast.corrupt_tokens

    def grid_so_far(so_far: I.PatchGrid) -> None:
        """The grid while exact patching runs: attribution patching's estimate at once (two passes), its rows
        replaced by the exact ones as they are computed."""
        drawn[0] += 1
        grid = I.fill_in(so_far, probe(I.attribution, loaded, *args, direction, pos, rdir)[site])
        done, rows = I.rows_done(so_far), len(so_far.rows)
        show(V.restored_grid(grid, V.columns(grid, corrupt_tokens),
                             f"{I.KINDS[site]}: {done} of {rows} rows exact, the rest estimated", theme), Origin(
             "model", f"{md(loaded.id)}'s own logits: {done} of {rows} rows patched exactly; the others estimated "
                      "by attribution patching until their runs are done"),
             key=f"patch_so_far_{drawn[0]}", fold=390)

    exact = probe(I.patching, loaded, *args, site, direction, pos, rdir, partial=grid_so_far,
                  label=f"Patching every cell of the {I.KINDS[site]}", heavy=True, progress=True) \
        if method != "attribution" \
        else None
    estimates = probe(I.attribution, loaded, *args, direction, pos, rdir) if method != "exact" else None
    shown = exact if exact is not None else (estimates or {})[site]
    labels = V.columns(shown, contrast.corrupt_tokens)
    R, K = shown.restored.shape
    best = shown.strongest()
    chart = st.container()  # the grid above, the cell it highlights chosen below it
    c_row, c_col = st.columns(2)
    with c_row:
        row = c.selectbox("layer", list(range(R)), default=best[0], format_func=lambda i: shown.rows[i],
                          label_visibility="collapsed")
    with c_col:
        col = c.token("col", labels, best[1], format_func=lambda j: labels[j],  # positions (or heads): follows them
                      label_visibility="collapsed")
    computed = (f"{shown.runs} patched runs in {shown.seconds:.2f} s" if shown.method == "exact" else
                "estimated by attribution patching")
    origin = Origin("model", f"{md(loaded.id)}'s own logits, its {I.KINDS[site]} patched: {computed}")
    title = (f"{'Denoising' if direction == 'denoise' else 'Noising'}: {I.KINDS[site]} restored"
             + (f" ({shown.method})" if method == "both" else ""))
    scale = V.colour_range(shown, span)
    fig = figure_of(V.restored_grid, shown, labels, title, theme, (row, col), scale)
    with chart:
        show(fig, origin, key="patch_grid", filename="interventions", fold=390)

    ld_cell = float(shown.values[row, col])
    st.latex(r"\text{restored} = \frac{LD_\text{patched} - LD_\text{corrupted}}{LD_\text{clean} - "
             rf"LD_\text{{corrupted}}}} = \frac{{{ld_cell:.3f} - ({contrast.corrupted.ld:.3f})}}"
             rf"{{{contrast.clean.ld:.3f} - ({contrast.corrupted.ld:.3f})}} = {float(shown.restored[row, col]):.3f}")
    run = "corrupted" if direction == "denoise" else "clean"
    caption(
        f"LD = logit(“{md(contrast.answer)}”) − logit(“{md(contrast.wrong)}”) {md(contrast.reads)}. Clean: "
        f"{contrast.clean.ld:.3f} (p = {contrast.clean.p_answer:.3f} and {contrast.clean.p_wrong:.3f}); corrupted: "
        f"{contrast.corrupted.ld:.3f} (p = {contrast.corrupted.p_answer:.3f} and {contrast.corrupted.p_wrong:.3f}). "
        f"The highlighted cell, {md(shown.rows[row])} at {md(labels[col])}: the {run} run with "
        f"{'this' if shown.method == 'exact' else 'an estimate of this'} one activation from the other run gives "
        f"LD {ld_cell:.3f}"
        + ("" if (pp := shown.probabilities(row, col)) is None else f" (p = {pp[0]:.3f} and {pp[1]:.3f})")
        + f". {V.rows_note(shown)}")

    if other_id is not None and (other := get_model(other_id)) is not None:
        try:  # the second model (?compare=): the same prompts, site, direction and method, on the same scale
            probe(I.layout, other, raising=True)
            probe(I.contrast, other, *args, raising=True)
            shown_b = probe(I.patching, other, *args, site, direction, pos, rdir, heavy=True, raising=True) \
                if shown.method == "exact" else \
                probe(I.attribution, other, *args, direction, pos, rdir, raising=True)[site]
        except (ViewError, KeyError) as exc:
            st.warning(f"{md(other_id)} cannot be compared here: "
                       + (f"it has no {I.KINDS[site]} to patch." if isinstance(exc, KeyError) else md_message(exc)))
        else:
            same = shown_b.restored.shape == shown.restored.shape and shown_b.rows == shown.rows
            show(V.restored_grid(shown_b, V.columns(shown_b, corrupt_tokens), f"{other_id}: {title}", theme,
                                 (row, col) if same else None, scale),
                 Origin("model", f"{md(other_id)}'s own logits, its {I.KINDS[site]} patched ({shown_b.method})"),
                 key="patch_grid_b", filename="interventions-compare", fold=390)
            if same:
                show(V.difference_grid(shown, shown_b, labels, (loaded.id, other_id), theme),
                     Origin("model", "the difference of the two models' own restored fractions, cell by cell"),
                     key="patch_grid_diff", filename="interventions-difference", fold=390)
                caption(f"Both grids on one colour scale (±{scale:g}). At the highlighted cell {md(other_id)} "
                           f"restores {float(shown_b.restored[row, col]):.3f} against {md(loaded.id)}'s "
                           f"{float(shown.restored[row, col]):.3f}.")
            else:
                st.info(f"No difference is drawn: {md(other_id)}'s grid has other rows or columns "
                        f"({shown_b.restored.shape[0]} × {shown_b.restored.shape[1]} against {R} × {K}).")

    if exact is not None and estimates is not None:
        estimate = estimates[site]
        agree = I.agreement(exact, estimate)
        show(V.restored_grid(estimate, labels, "Attribution patching's estimate of the same grid", theme, (row, col),
                             scale),
             Origin("model", f"gradients of {md(loaded.id)}'s own logit difference (autograd) times the "
                             f"activations' differences; {estimate.seconds:.2f} s for every grid"),
             key="patch_estimate", filename="interventions-attribution")
        st.markdown(f"**How well the estimate holds here:** Pearson r = {agree.r:.3f} over the {R * K} cells; the "
                    f"largest gap is at {md(agree.worst_row)}, {md(agree.worst_col)}: exact {agree.exact:.3f}, "
                    f"estimate {agree.estimate:.3f}.")
        show(V.exact_vs_estimate(exact, estimate, labels, theme), Origin("model", "the two grids above, cell by cell"),
             key="patch_scatter", filename="interventions-agreement")

st.subheader("Ablation")
c_comp, c_how = st.columns([3, 1], vertical_alignment="bottom")
with c_comp:
    chosen = c.multiselect("ablate", probe(I.components, loaded), format_func=I.component_label,
                           placeholder="Heads, MLP layers or units")
with c_how:
    how: str = c.selectbox("how", label_visibility="collapsed", format_func=lambda h: f"{h} ablation")
ablated = probe(I.ablation, loaded, text, tuple(chosen), how, corrupt, answer, wrong)
for note in ablated.notes:
    st.info(md_message(note))
show(V.ablation_bars(ablated, theme), Origin("model", f"{md(loaded.id)}'s own probabilities of the "
                                                      f"{ablated.outputs}, with and without the ablation"),
     key="ablation", filename="interventions-ablation")
if chosen:
    change = "" if ablated.before is None or ablated.after is None else (
        f" The logit difference goes from {ablated.before.ld:.3f} to {ablated.after.ld:.3f}.")
    caption(f"{md(ablated.before_tokens[0])} had p = {ablated.before_probs[0]:.4f}; after the ablation "
               f"p = {ablated.top_after:.4f}.{change}")
else:
    caption("Choose heads, MLP layers or recurrent units above to ablate them in the clean run.")
# What to notice: the first point is computed on this pair (how many tokens differ, and what the grid restores)
recurrent = "resid" not in layout.kinds
points: list[str] = []
if contrast is not None:
    shown_h = exact is not None and exact.kind == "h" and exact.direction == "denoise" and rdir == "fwd"
    grid = exact if not recurrent or shown_h else \
        probe(I.patching, loaded, *args, "h", "denoise", -1, "fwd")  # a few runs of the forward recurrence
    points = V.first_patch_points(I.first_patches(contrast, grid), recurrent, "c" in layout.kinds)
if not recurrent:
    points.append("Read the residual grid from the bottom: which positions carry the difference in the early layers, "
                  "and at which layer it has moved to the last position, where the next token is read out.")
what_to_notice([
    *points,
    "Attribution patching costs two passes for every grid; where a patch changes the model a lot (often the first "
    "layers at the tokens that differ) the straight-line estimate can be far off: compare the two grids.",
    "Noising asks the opposite question: which activations the clean answer cannot do without.",
])
