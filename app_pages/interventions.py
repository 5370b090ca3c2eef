"""Interventions: activation patching, attribution patching and ablation on a clean/corrupted pair of prompts."""
import streamlit as st

from explorer.data.examples import CONTRASTS
from explorer.presenters import interventions as P
from explorer.probes import interventions as I
from explorer.text.escape import md, md_message
from explorer.runtime.errors import ViewError
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import follow_preset, model_and_sentence, page_header

c = Controls("interventions")
FOLDS: dict[str, Place] = {name: {"fold": P.FOLD} for name in ("patch_grid", "patch_grid_b", "patch_grid_diff")}
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
exact = None
rdir = "fwd"

if contrast is not None:
    draw(P.said(contrast))
    c_site, c_dir, c_method, c_cmp, c_more = st.columns([1.6, 1.0, 1.05, 1.5, 1.2], vertical_alignment="bottom")
    with c_cmp:
        other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
    with c_site:
        site = c.selectbox("site", list(layout.kinds), label_visibility="collapsed", format_func=I.KINDS.get)
    with c_dir:
        direction: str = c.selectbox("direction", label_visibility="collapsed", format_func=P.DIRECTIONS.get)
    with c_method:
        method: str = c.selectbox("method", label_visibility="collapsed", format_func=P.METHODS.get)
    tokens = contrast.tokens
    with c_more, st.popover("Options", icon=":material/tune:", width="stretch"):
        pos = c.token("pos", tokens, -1, list(range(-1, len(tokens))), disabled=site != "heads",  # follows the prompt
                      format_func=lambda t: P.position_label(tokens, t))
        rdir = c.radio("dir", list(layout.directions), format_func=P.RECURRENCE.get,
                       disabled=len(layout.directions) < 2)
        span: str = c.radio("range", format_func=P.RANGES.get, horizontal=True)
    drawn = [0]

    def grid_so_far(so_far: I.PatchGrid) -> None:
        """The grid while exact patching runs: attribution patching's estimate at once (two passes), its rows
        replaced by the exact ones as they are computed."""
        assert contrast is not None
        drawn[0] += 1
        draw(P.so_far(so_far, probe(I.attribution, loaded, *args, direction, pos, rdir)[site], contrast, site,
                      theme()), {"patch_so_far": {"key": f"patch_so_far_{drawn[0]}", "fold": P.FOLD}})

    exact = probe(I.patching, loaded, *args, site, direction, pos, rdir, partial=grid_so_far,
                  label=f"Patching every cell of the {I.KINDS[site]}", heavy=True, progress=True) \
        if method != "attribution" \
        else None
    estimates = probe(I.attribution, loaded, *args, direction, pos, rdir) if method != "exact" else None
    shown = P.shown(exact, estimates, site)
    labels = P.columns(shown, contrast)
    best = shown.strongest()
    chart = st.container()  # the grid above, the cell it highlights chosen below it
    c_row, c_col = st.columns(2)
    with c_row:
        row = c.selectbox("layer", list(range(len(shown.rows))), default=best[0], format_func=lambda i: shown.rows[i],
                          label_visibility="collapsed")
    with c_col:
        col = c.token("col", labels, best[1], format_func=lambda j: labels[j],  # positions (or heads): follows them
                      label_visibility="collapsed")
    with chart:
        draw(P.patched(contrast, shown, site, direction, method, (row, col), span, theme(), figure_of), FOLDS)
    draw(P.equation(contrast, shown, direction, (row, col)))

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
            draw(P.compared(contrast, shown, shown_b, other_id, site, direction, method, (row, col), span, theme()),
                 FOLDS)

    if exact is not None and estimates is not None:
        draw(P.estimated(contrast, exact, estimates[site], (row, col), span, theme()))

st.subheader("Ablation")
c_comp, c_how = st.columns([3, 1], vertical_alignment="bottom")
with c_comp:
    chosen = c.multiselect("ablate", probe(I.components, loaded), format_func=I.component_label,
                           placeholder="Heads, MLP layers or units")
with c_how:
    how: str = c.selectbox("how", label_visibility="collapsed", format_func=P.ablation_label)
draw(P.ablated(probe(I.ablation, loaded, text, tuple(chosen), how, corrupt, answer, wrong), loaded.id, theme()))
# What to notice: the first point is computed on this pair (how many tokens differ, and what the grid restores)
recurrent = "resid" not in layout.kinds
first = None
if contrast is not None:
    grid = exact if P.quotes_shown(exact, recurrent, rdir) else \
        probe(I.patching, loaded, *args, "h", "denoise", -1, "fwd")  # a few runs of the forward recurrence
    first = I.first_patches(contrast, grid)
notice(P.notices(first, recurrent, "c" in layout.kinds))
