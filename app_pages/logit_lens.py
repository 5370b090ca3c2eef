"""The logit lens: every layer's hidden state read through the model's own final norm and output layer."""
import streamlit as st

from explorer.probes.logit_lens import LensError, logit_lens, probability_of
from explorer.text.escape import md, md_message, plotly_text
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.charts import Origin, caption, show
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import logit_lens as V

c = Controls("logit-lens")
page_header("Logit lens", "What each layer would predict if the model stopped there: its hidden state read through "
            "the model's own final norm and output layer (nostalgebraist 2020).")
_, loaded, text = model_and_sentence(c)
trace = probe(logit_lens, loaded, text)  # a LensError is shown (st.info) and stops the page
for note in trace.notes:
    st.info(md_message(note))
theme = settings.theme()
L, T = trace.top_probs.shape
c1, c2, c3 = st.columns([1, 1, 1])
with c3:
    other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
with c1:
    pos = c.token("pos", trace.tokens, T - 1, label_visibility="collapsed",  # follows the sentence
                  format_func=lambda t: f"after token {t}: {trace.tokens[t]}")
with c2:
    layer = c.selectbox("layer", list(range(L)), default=L - 1, label_visibility="collapsed",
                        format_func=lambda i: f"top 10 after {trace.layers[i]}")
own = Origin("model", f"each layer's hidden state through {loaded.id}'s own final norm and output layer; the last "
                      f"layer ({trace.layers[-1]}) equals the model's own logits to {trace.lens_error:.1e}.")
rows = V.grid_rows(L, layer)  # a deep model: every k-th layer and the selected one in the first screen
show(V.lens_grid(trace, theme, (layer, pos), rows), own, key="lens_grid", filename="logit-lens", fold=True)
if other_id is not None and (other := get_model(other_id)) is not None:
    try:
        trace_b = probe(logit_lens, other, text, raising=True)
    except LensError as exc:
        st.warning(f"{md(other_id)} cannot be compared here: {md_message(exc)}")
    else:
        show(V.lens_grid(trace_b, theme, (layer, pos) if layer < len(trace_b.layers) else None, named=True),
             Origin("model", f"each layer's hidden state through {md(other_id)}'s own final norm and output layer."),
             key="lens_grid_b", filename="logit-lens-compare")
        try:
            same = trace_b.tokens == trace.tokens and len(trace_b.layers) == L
            tracked = probe(probability_of, other, text, trace.final_ids, raising=True) if same else None
        except LensError:
            tracked = None
        if tracked is None:
            st.info(f"No difference is drawn: {md(other_id)} and {md(loaded.id)} do not read this sentence as the same "
                    "tokens through the same number of layers and vocabulary.")
        else:
            show(V.tracked_difference(trace, tracked, other_id, theme),
                 Origin("model", "the difference of the two models' own lens probabilities of the first model's "
                                 "prediction at each position."), key="lens_diff", filename="logit-lens-difference")
            caption(f"Both grids on one colour scale (p from 0 to 1). The difference follows {md(loaded.id)}'s own "
                       f"prediction at each position (the hover names it): the probability {md(other_id)} gives it "
                       f"after each layer minus {md(loaded.id)}'s; largest |B − A|: "
                       f"{V.tracked_gap(trace, tracked):.3f}.")
tokens, probs = trace.bars(layer, pos)
final = trace.final_tokens[pos]
show(V.lens_bars(tokens, probs, f"After {trace.layers[layer]}, next after “{plotly_text(trace.tokens[pos])}”: "
                 f"top {len(tokens)}", theme, mark=final), own, key="lens_bars", filename="logit-lens-bars")
caption(f"The model's own prediction after “{md(trace.tokens[pos])}” is “{md(final)}”: after "
           f"{trace.layers[layer]} it "
           f"ranks {int(trace.final_rank[layer, pos]) + 1} with p = {trace.final_prob[layer, pos]:.4f} (outlined when "
           f"in the top {len(tokens)}). {V.numbering(trace.layers)}")
if len(rows) < L:
    caption(f"The grid shows {len(rows)} of the {L} layers: {', '.join(trace.layers[i] for i in rows)} (every "
               "few layers, counted down from the output, and the chosen one); all of them are below.")
    with st.expander(f"All {L} layers"):
        show(V.lens_grid(trace, theme, (layer, pos)), own, key="lens_grid_all", filename="logit-lens-all-layers")
enters = trace.first_in_top(pos)  # the column picked above: computed, not a general rule
if L > 1:
    COLUMN = (f"Read a column bottom to top: after “{md(trace.tokens[pos])}” the model's own prediction, "
              f"“{md(final)}”, ranks {int(trace.final_rank[0, pos]) + 1} after {trace.layers[0]} (whose top guess is "
              f"“{md(trace.top_tokens[0][pos])}”) and "
              + (f"enters the top 10 after {trace.layers[enters]} (rank {int(trace.final_rank[enters, pos]) + 1})."
                 if enters is not None else "stays out of the top 10 until the output.")
              + " The layers in between show how it settles on its choice.")
else:
    COLUMN = (f"This model has one layer: the lens has one row, {trace.layers[0]}, which is the model's own output; "
              "a deeper model shows its prediction forming layer by layer.")
what_to_notice([
    COLUMN,
    "The hover gives the rank of the model's final prediction after every layer: how early it 'knows' the answer.",
    f"The top row ({trace.layers[-1]}) is the model's output: it equals the model's own logits to "
    f"{trace.lens_error:.1e} (the chart's badge prints the same difference).",
])
