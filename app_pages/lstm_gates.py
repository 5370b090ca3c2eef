"""Inside the recurrent cell: LSTM / GRU / Elman gates, cell and hidden states for your sentence, unit by unit."""
import streamlit as st

from explorer.adapters.task_head import not_a_language_model
from explorer.probes import lstm_gates as P
from explorer.text.escape import md, md_message
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.charts import Origin, badge, caption, show, table
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import lstm_gates as V

COMPUTER = "The computer which I had just put into the machine room on the fifth floor crashed."
PAIRS = {
    "subject + relative clause: dog / dogs": ("the dog that the farmers feed sleeps in the garden .",
                                              "the dogs that the farmers feed sleep in the garden ."),
    "attractor in a prepositional phrase: key / keys": ("the key to the old cabinets is on the table .",
                                                        "the keys to the old cabinets are on the table ."),
    "the computer / computers … crashed": (COMPUTER.lower(), COMPUTER.lower().replace("computer", "computers")),
    "object relative clause: woman / women": ("the woman who the doctors visited yesterday was very tired .",
                                              "the women who the doctors visited yesterday were very tired ."),
}
OWN_PAIR = "your own pair"

c = Controls("lstm-gates")
page_header("Inside the recurrent cell",
            "Every gate, cell state and hidden state of an LSTM, GRU or Elman RNN for your sentence, unit by unit, "
            "recomputed from the model's own weights with PyTorch's equations.")

model_id, loaded, text = model_and_sentence(c)
try:
    trace = probe(P.rnn_gates, loaded, text, raising=True)
except P.RNNGatesError as exc:  # the message names the model and the cells this view reads
    st.error(f"{V.plain(model_id)} cannot be read as an LSTM, GRU or Elman RNN: {V.plain(str(exc))}")
    st.stop()
if not len(trace):
    for note in trace.notes:
        st.info(V.plain(note))
    st.stop()
for note in trace.notes:
    st.warning(V.plain(note))

# ------------------------------------------------------------------------------------- heatmap
theme = settings.theme()
START = f"from {md(trace.tokens[0])} on" if trace.special[0] else \
    "from the first token on (no beginning-of-sentence token)"
GATES = Origin("recomputed", f"every gate and state from the weights with PyTorch's {trace.cell.upper()} equations, "
                             f"{START}: the hidden states equal torch.nn.{trace.cell.upper()}'s on this run to "
                             f"{trace.max_abs_error:.1e}.")
c_gate, c_layer, c_cmp, c_more = st.columns([2.2, 1, 1.6, 1], vertical_alignment="bottom")
with c_cmp:
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True, label_visibility="collapsed")
with c_gate:
    name = c.selectbox("gate", list(trace.names), default="c" if "c" in trace.names else "h", format_func=P.LABELS.get,
                   label_visibility="collapsed")
with c_layer:
    layer = 0
    if trace.num_layers > 1:
        layer = c.selectbox("layer", list(range(trace.num_layers)), format_func=lambda i: f"layer {i}",
                            label_visibility="collapsed")
with c_more, st.popover("Units", icon=":material/tune:", width="stretch"):
    direction = 0
    if trace.num_directions == 2:
        direction = ["forward", "backward"].index(c.radio("dir"))
    sort: str = c.radio("sort")
    top = 1
    if trace.hidden_size > 1:
        top = c.number("top", slider=True, hi=trace.hidden_size, default=min(64, trace.hidden_size))
values = trace.gates[name][layer, direction]
trained = trained_model(loaded)  # a snapshot: units ordered, and coloured, as the trained model has them
reference = trace if trained is None else probe(P.rnn_gates, trained, text, raising=True)
ref_values = reference.gates[name][layer, direction]
units = P.unit_order(ref_values, sort, top)
other, diff, why = None, None, ""
if other_id is not None and (other_model := get_model(other_id)) is not None:
    try:
        other = probe(P.rnn_gates, other_model, text, raising=True)
    except P.RNNGatesError as exc:
        st.warning(f"{V.plain(other_id)} cannot be compared here: {V.plain(str(exc))}")
    else:
        diff, why = P.model_difference(trace, other, name, layer, direction)
scale = () if trained is None else (ref_values[:, units],)
if diff is not None and other is not None:  # both models on one colour scale
    scale = (*scale, values[:, units], other.gates[name][layer, direction][:, units])
show(V.gate_heatmap(trace, name, layer, direction, units, theme, scale, named=other is not None),
     GATES, key="heatmap", filename=f"{name}-layer{layer}", fold=True)
caption(f"{trace.num_layers} layer{'s' if trace.num_layers > 1 else ''}"
           + (", both directions" if trace.num_directions == 2 else "")
           + f" · {trace.hidden_size} units, {len(units)} shown, sorted by {sort} (change both under Units)"
           + ("" if trained is None else f"; at every training step the units are sorted, and the colours scaled, "
                                         f"as in the trained model ({md(trained.id)}) on this sentence"))
if other is not None:
    if diff is None:
        st.info(f"{md(other_id)} is drawn on its own scale and in its own order of units, with no difference: "
                f"{md(why)}.")
        other_values = other.gates[name][min(layer, other.num_layers - 1), 0] if name in other.gates else None
        if other_values is not None:
            show(V.gate_heatmap(other, name, min(layer, other.num_layers - 1), 0,
                                P.unit_order(other_values, sort, top), theme, named=True),
                 GATES, key="heatmap_b", filename=f"{name}-compare")
    else:
        show(V.gate_heatmap(other, name, layer, direction, units, theme, scale, named=True), GATES, key="heatmap_b",
             filename=f"{name}-compare")
        show(V.model_diff_heatmap(diff, units, trace.tokens, name, model_id, other.model_id, theme),
             Origin("recomputed", f"the difference of the two recomputed runs on this sentence; their hidden states "
                                  f"equal torch.nn's to {trace.max_abs_error:.1e} and {other.max_abs_error:.1e}."),
             key="heatmap_diff", filename=f"{name}-difference")
        caption(f"Both on one colour scale, units in the order of {md(model_id)}'s heatmap; largest |B − A|: "
                   f"{V.largest(diff[:, units]):.3f}.")
with st.expander(f"What the view read from {md(model_id)}", expanded=loaded.family == "state-dict"):
    badge(Origin("model", "read from the checkpoint's weights and their shapes."))
    st.markdown(V.inferred_markdown(trace))
    caption(f"Check: the recomputed hidden states equal torch.nn's own {trace.cell.upper()} on the same "
               f"weights to {trace.max_abs_error:.1e} (max |difference|).")

# ------------------------------------------------------------------------------------ sections
SECTIONS = c.params["section"].choices
section: str = c.radio("section", label_visibility="collapsed")

if section == SECTIONS[0]:
    u1, u2 = st.columns([1, 4])
    with u1:
        unit = c.selectbox("unit", list(range(trace.hidden_size)), default=int(units[0]))
    with u2:
        unit_values = trace.gates[name][layer, direction, :, unit]
        lo, hi = V.value_range(name, (unit_values if trained is None
                                      else reference.gates[name][layer, direction, :, unit]))
        st.html(V.colored_tokens_html(trace.tokens, unit_values, lo, hi, V.state_colorscale(name, theme)))
        caption(f"The sentence coloured by the {P.LABELS[name]} of unit {unit} in the heatmap's colours "
                   f"({V.scale_words(name, theme)}; scale {lo:.2f} … {hi:.2f}); hover a word for its value. Pick the "
                   "state above the heatmap.")
    show(V.unit_lines(trace, layer, direction, unit, theme,
                      None if trained is None else V.unit_range((reference, trace), layer, direction, unit)),
         GATES, key="unit_lines", filename=f"unit{unit}")
    if trained is not None:
        caption(f"The y axis holds this unit's states in the trained model ({md(trained.id)}) and at this step: "
                   "it stays put while the step changes, unless a step goes beyond the trained model's range.")

    st.markdown("**The cell's equations, with the numbers**")
    t = c.token("t", trace.tokens, c.params["t"].default, format_func=lambda i: f"{i} · {trace.tokens[i]}")
    terms = P.cell_terms(trace, layer, direction, t, unit)
    caption(f"Unit {unit}, layer {layer}, token {t}. Under each brace: the unit's row of the weights times the "
               "input (or the previous hidden state), plus its bias.")
    st.latex(V.equations_latex(terms))

elif section == SECTIONS[1]:
    sat = P.saturation(trace, layer, direction)
    if sat:
        show(V.saturation_scatter(sat, theme), GATES, key="saturation", filename="saturation")
        caption("Each dot is a unit. Top-left: a gate almost always open; bottom-right: almost always closed; "
                   "near the diagonal: a gate that switches sharply (Karpathy et al. 2015, Fig. 3). "
                   "Type a longer text for meaningful fractions.")
    else:
        st.info("An Elman RNN has no gates: nothing saturates but its hidden state.")

elif section == SECTIONS[2]:
    if trace.next_ids.shape[1]:
        table(V.next_token_rows(trace), Origin("model", "softmax of the model's own logits on this run."))
        caption("After reading each token, the five most probable next words: softmax(W_out hₜ + b), the model's "
                   "own output on this run (an unknown-word token, any word outside the vocabulary, in a column of "
                   "its own)" + (f", which starts at {md(trace.tokens[0])} as the model was "
                                                       "trained." if trace.special[0]
                                                       else ", from the first token as typed."))
    else:
        st.info(md(not_a_language_model(loaded, "predicts no next word")) or
                "This model has no output layer over its vocabulary (or reads in both directions): "
                "it does not predict next tokens.")

else:
    pair = c.selectbox("pair", [*PAIRS, OWN_PAIR])
    if pair == OWN_PAIR:
        text_a = c.text_input("a", PAIRS[next(iter(PAIRS))][0], max_chars=2000)
        text_b = c.text_input("b", PAIRS[next(iter(PAIRS))][1], max_chars=2000)
    else:
        text_a, text_b = PAIRS[pair]
    trace_a, trace_b = probe(P.rnn_gates, loaded, text_a), probe(P.rnn_gates, loaded, text_b)
    if len(trace_a) and len(trace_b):
        cmp = P.compare(trace_a, trace_b, name, layer, direction)
        for note in cmp.notes:
            st.info(md_message(note))
        show(V.diff_heatmap(cmp, cmp.order[:top], theme), Origin(
            "recomputed", f"the difference of two recomputed runs; their hidden states equal torch.nn's to "
                          f"{trace_a.max_abs_error:.1e} and {trace_b.max_abs_error:.1e}."),
             key="compare_sentences", filename="difference")
        caption(f"Units whose {P.LABELS[name]} differs most from the first different token on: "
                   + ", ".join(f"{u} ({cmp.score[u]:.3f})" for u in cmp.order[:5]))
    else:
        st.info("Type two sentences to compare.")

# What to notice, for this cell (an LSTM, a GRU and an Elman RNN keep a state differently), computed on the first
# pair of sentences (dog / dogs) and on the sentence shown
PAIR = next(iter(PAIRS.values()))
notice = P.gate_notice(trace, probe(P.rnn_gates, loaded, PAIR[0]), probe(P.rnn_gates, loaded, PAIR[1]), layer,
                       direction)
points = V.notice_points(notice, trace, PAIR)
what_to_notice([*points, "Unknown words are read as <unk>: the same embedding for every unknown word."])
