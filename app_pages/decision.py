"""What a task model decides: the label probabilities of two sentences side by side, the decision word by word (the
model run on each prefix), a tagger's words × labels grid, and where the chosen label comes from."""
import streamlit as st

from explorer.probes.decision import DecisionError, attribute, decide
from explorer.text.escape import md, md_message
from explorer.ui import settings
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.compare import compare_picker
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import decision as V

c = Controls("decision")
page_header("What the model decides",
            "A classifier's labels for a sentence, or a tagger's label for each word: the model's own probabilities, "
            "the decision forming word by word, and which words it comes from.")
theme = settings.theme()

model_id, loaded, text = model_and_sentence(c)
trace = probe(decide, loaded, text, "")
c1, c2, c3, c4 = st.columns([1.6, 1.5, 1.6, 1.1], vertical_alignment="bottom")  # "Options" whole at 20 px
with c1:
    second = c.text_input("b", max_chars=2000, label_visibility="collapsed",
                          placeholder="Second sentence, side by side (empty: none)") if not trace.per_token else ""
with c2:
    other_id = compare_picker(c.view.needs, model_id, label_visibility="collapsed")
labels = list(range(len(trace.labels)))
with c3:
    label = c.selectbox("label", [-1, *labels], format_func=lambda i: "Explain: its choice" if i < 0 else
                        f"Explain: {trace.labels[i]}", label_visibility="collapsed")
with c4, st.popover("Options", icon=":material/tune:", width="stretch"):
    foil = c.selectbox("foil", [-1, *labels], format_func=lambda i: "rather than: (nothing)" if i < 0 else
                       f"rather than {trace.labels[i]}")
    method: str = c.radio("method", horizontal=True)
    steps = c.number("steps")
    pair = c.text_input("pair", max_chars=2000) if loaded.caps.decision and loaded.caps.decision.head.pairs else ""
if pair:
    trace = probe(decide, loaded, text, pair)
for note in trace.notes:
    st.info(md(note))

OWN = Origin("model", f"softmax of {md(model_id)}'s own head logits over its {len(trace.labels)} labels "
                      f"({md(trace.what)}).")
if trace.per_token:  # the grid first (in the first screen), then the word whose label is explained
    show(figure_of(V.tag_grid, trace, theme), OWN, key="decision_main", filename="decision-tags", fold=True)
    token = c.token("token", trace.tokens, max(i for i, s in enumerate(trace.special) if not s) if not all(
        trace.special) else 0, label="Word whose label is explained")
else:
    token = -1
    traces, names = [trace], [V.named("A", text)]
    if second.strip():
        traces.append(probe(decide, loaded, second, pair))
        names.append(V.named("B", second))
    show(figure_of(V.label_bars, tuple(traces), tuple(names), theme), OWN, key="decision_main",
         filename="decision-labels", fold=True)
chosen = int(trace.probs[token].argmax()) if trace.per_token else int(trace.probs.argmax())
shown = chosen if label < 0 else label
if foil == shown:
    st.warning(md_message(V.no_contrast(trace, shown)))
    foil = -1
caption(f"Chosen: **{md(trace.labels[chosen])}**" + ("" if trace.per_token else
        f" with p = {float(trace.probs[chosen]):.4f}") + f" · {md(trace.what)} · read by {md(loaded.adapter.name)}.")

if trace.prefix_probs is not None:
    st.subheader("The decision word by word")
    show(figure_of(V.prefix_lines, trace, theme), Origin("model", "each point is the model run on the prefix that "
                                                                   "ends with that word: a forward pass each."),
         key="prefixes", filename="decision-prefixes")
    caption(V.turns(trace))

st.subheader("Where the label comes from")
attr = probe(attribute, loaded, text, shown, foil, token, pair, steps)
show(figure_of(V.attribution_bars, attr, method, theme),
     Origin("model", f"gradients of {md(attr.of)} through {md(model_id)}'s own forward; integrated gradients' "
                     f"completeness error {attr.relative:.2%} after {attr.evaluations} gradient evaluations."),
     key="attribution", filename="decision-attribution")
st.latex(V.equation(attr))
if (warning := V.completeness_warning(attr)) is not None:
    st.warning(md_message(warning))

if other_id is not None and (other := get_model(other_id)) is not None:
    st.subheader(f"Compared with {md(other_id)}")
    try:
        trace_o = probe(decide, other, text, pair, raising=True)
    except DecisionError as exc:
        st.warning(f"{md(other_id)} cannot be compared here: {md(str(exc))}")
    else:
        if trace_o.labels != trace.labels or trace_o.per_token != trace.per_token:
            st.info(f"{md(other_id)} is {md(trace_o.what)}: its labels are not {md(model_id)}'s, so its own are shown.")
        fig = figure_of(V.tag_grid, trace_o, theme) if trace_o.per_token else \
            figure_of(V.label_bars, (trace_o,), (other_id,), theme)
        show(fig, Origin("model", f"softmax of {md(other_id)}'s own head logits."), key="compare_main",
             filename="decision-compare")

with st.expander("What was read from the model"):
    table([{"what": a, "value": b} for a, b in loaded.adapter.describe()], Origin("model"), hide_index=True)
what_to_notice(V.notice(trace))
