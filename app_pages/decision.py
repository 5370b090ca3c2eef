"""What a task model decides: the label probabilities of two sentences side by side, the decision word by word (the
model run on each prefix), a tagger's words × labels grid, and where the chosen label comes from."""
import streamlit as st

from explorer.presenters import decision as P
from explorer.probes.decision import DecisionError, attribute, decide
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header

c = Controls("decision")
PLACES: dict[str, Place] = {"tags": {"key": "decision_main", "fold": True},  # the charts' keys as they were
                            "labels": {"key": "decision_main", "fold": True}, "compare": {"key": "compare_main"}}
page_header("What the model decides",
            "A classifier's labels for a sentence, or a tagger's label for each word: the model's own probabilities, "
            "the decision forming word by word, and which words it comes from.")

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
    label = c.selectbox("label", [-1, *labels], format_func=lambda i: P.label_option(trace, i),
                        label_visibility="collapsed")
with c4, st.popover("Options", icon=":material/tune:", width="stretch"):
    foil = c.selectbox("foil", [-1, *labels], format_func=lambda i: P.foil_option(trace, i))
    method: str = c.radio("method", horizontal=True)
    steps = c.number("steps")
    pair = c.text_input("pair", max_chars=2000) if loaded.caps.decision and loaded.caps.decision.head.pairs else ""
if pair:
    trace = probe(decide, loaded, text, pair)
trace_b = probe(decide, loaded, second, pair) if second.strip() else None
draw(P.main(trace, text, trace_b, second, theme(), figure_of), PLACES)
token = c.token("token", trace.tokens, P.last_word(trace), label="Word whose label is explained") \
    if trace.per_token else -1  # under the grid
shown, contrast = P.question(trace, token, label, foil)
attr = probe(attribute, loaded, text, shown, contrast, token, pair, steps)
other, failed = None, ""
if other_id is not None and (loaded_o := get_model(other_id)) is not None:
    try:
        other = probe(decide, loaded_o, text, pair, raising=True)
    except DecisionError as exc:
        failed = str(exc)
draw(P.present(trace, attr, token, label, foil, method, loaded.adapter.name, theme(), other, other_id or "", failed,
               figure_of, loaded.family), PLACES)
with st.expander("What was read from the model"):
    draw(P.described(loaded.adapter.describe()), {"what was read from the model": {"wide": True}})
notice(P.notices(trace))
