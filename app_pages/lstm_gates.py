"""Inside the recurrent cell: LSTM / GRU / Elman gates, cell and hidden states for your sentence, unit by unit."""
import streamlit as st

from explorer.presenters import lstm_gates as P
from explorer.probes.lstm_gates import RNNGatesError, rnn_gates
from explorer.text.escape import md_line
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import badge
from explorer.ui.compare import compare_picker
from explorer.ui.present import draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_and_sentence, page_header

c = Controls("lstm-gates")
page_header("Inside the recurrent cell",
            "Every gate, cell state and hidden state of an LSTM, GRU or Elman RNN for your sentence, unit by unit, "
            "recomputed from the model's own weights with PyTorch's equations.")

model_id, loaded, text = model_and_sentence(c)
try:
    trace = probe(rnn_gates, loaded, text, raising=True)
except RNNGatesError as exc:  # the message names the model and the cells this view reads
    st.error(f"{md_line(model_id)} cannot be read as an LSTM, GRU or Elman RNN: {md_line(exc)}")
    st.stop()
draw(P.opening(trace))
if not len(trace):
    st.stop()

# ------------------------------------------------------------------------------------- heatmap
c_gate, c_layer, c_cmp, c_more = st.columns([2.2, 1, 1.6, 1], vertical_alignment="bottom")
with c_cmp:
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True, label_visibility="collapsed")
with c_gate:
    name = c.selectbox("gate", list(trace.names), default=P.default_state(trace), format_func=P.state_label,
                       label_visibility="collapsed")
with c_layer:
    layer = 0
    if trace.num_layers > 1:
        layer = c.selectbox("layer", list(range(trace.num_layers)), format_func=P.layer_label,
                            label_visibility="collapsed")
with c_more, st.popover("Units", icon=":material/tune:", width="stretch"):
    direction = 0
    if trace.num_directions == 2:
        direction = ["forward", "backward"].index(c.radio("dir"))
    sort: str = c.radio("sort")
    top = 1
    if trace.hidden_size > 1:
        top = c.number("top", slider=True, hi=trace.hidden_size, default=min(64, trace.hidden_size))
trained = trained_model(loaded)  # a snapshot: units ordered, and coloured, as the trained model has them
reference = None if trained is None else probe(rnn_gates, trained, text, raising=True)
trained_id = "" if trained is None else trained.id
units = P.shown_units(trace, name, layer, direction, sort, top, reference)
other, other_error = None, ""
if other_id is not None and (other_model := get_model(other_id)) is not None:
    try:
        other = probe(rnn_gates, other_model, text, raising=True)
    except RNNGatesError as exc:
        other_error = str(exc)
draw(P.heatmaps(trace, name, layer, direction, units, sort, top, theme(), model_id, reference, trained_id, other,
                other_id or "", other_error), {"heatmap": {"fold": True}})
with st.expander(f"What the view read from {md_line(model_id)}", expanded=loaded.family == "state-dict"):
    badge(P.READ)
    draw(P.inferred(trace))

# ------------------------------------------------------------------------------------ sections
section: str = c.radio("section", label_visibility="collapsed")

if section == P.SECTIONS[0]:
    u1, u2 = st.columns([1, 4])
    with u1:
        unit = c.selectbox("unit", list(range(trace.hidden_size)), default=int(units[0]))
    with u2:
        draw(P.unit_colours(trace, name, layer, direction, unit, theme(), reference))
    draw(P.unit_states(trace, layer, direction, unit, theme(), reference, trained_id))
    st.markdown("**The cell's equations, with the numbers**")
    t = c.token("t", trace.tokens, c.params["t"].default, format_func=lambda i: f"{i} · {trace.tokens[i]}")
    draw(P.equations(trace, layer, direction, t, unit))
elif section == P.SECTIONS[1]:
    draw(P.saturated(trace, layer, direction, theme()))
elif section == P.SECTIONS[2]:
    draw(P.next_tokens(trace, loaded), {"next_tokens": {"wide": True}})
else:
    pair = c.selectbox("pair", [*P.PAIRS, P.OWN_PAIR])
    text_a, text_b = P.pair_texts(pair)
    if pair == P.OWN_PAIR:
        text_a = c.text_input("a", text_a, max_chars=2000)
        text_b = c.text_input("b", text_b, max_chars=2000)
    draw(P.two_sentences(probe(rnn_gates, loaded, text_a), probe(rnn_gates, loaded, text_b), name, layer, direction,
                         top, theme()))

# What to notice, for this cell, computed on the first pair of sentences (dog / dogs) and on the sentence shown
notice(P.notices(trace, probe(rnn_gates, loaded, P.FIRST_PAIR[0]), probe(rnn_gates, loaded, P.FIRST_PAIR[1]), layer,
                 direction))
