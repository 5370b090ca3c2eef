"""Masked-word prediction (BERT's pre-training task): the top-k fillers of each [MASK], two sentences side by side."""
import streamlit as st

from explorer.presenters import masked_words as P
from explorer.probes.masked_words import MASK, MaskedTrace, MaskedWordsError, masked_fill, words_of
from explorer.text.escape import md
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header

c = Controls("masked-words")
page_header("Masked-word prediction",
            f"BERT's pre-training task: hide a word behind {MASK} and see which words the model puts there, with its "
            "own probabilities. A masked language model reads the sentence from both sides.")

model_id, loaded, text = model_and_sentence(c, task=c.view.task,
                                            help=f"Type {md(MASK)} (or {md('<mask>')}) where a word should be.")
words = words_of(text)
c1, c2, c_cmp, c3 = st.columns([1.6, 1.9, 1.5, 1.2], vertical_alignment="bottom")  # labels whole at 20 px
with c1:
    index = c.token("mask", words, -1, [-1, *range(len(words))], label_visibility="collapsed",  # follows the text
                    format_func=lambda i: P.mask_option(words, i))
with c2:
    second = c.text_input("b", max_chars=2000, label_visibility="collapsed",
                          placeholder="Second sentence, side by side (empty: none)")
with c_cmp:
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True, label_visibility="collapsed")
with c3, st.popover("Options", icon=":material/tune:", width="stretch"):
    compare = c.text_input("words", max_chars=200)
    k = c.number("k")

trace = probe(masked_fill, loaded, text, k, compare, index)  # a MaskedWordsError: said, the page stops
trace_b = probe(masked_fill, loaded, second, k, compare, -1) if len(trace) and second.strip() else None
draw(P.opening(trace, trace_b))
if not len(trace):
    st.stop()

# the fillers in two columns: a sentence each (the first bars of each in the first screen), or one sentence's masks
names_a, names_b = P.fill_names(trace, trace_b)
first = 1 if names_b else 2
places: dict[str, Place] = {
    **{name: {"key": f"fill-A-{m}", "fold": P.FOLD if m < first else False, "share": 0.5}
       for m, name in enumerate(names_a)},
    **{name: {"fold": P.FOLD if m == 0 else False, "share": 0.5} for m, name in enumerate(names_b)}}
above, columns = P.fills(trace, trace_b, theme(), model_id, figure_of)
draw(above)
for column, part in zip(st.columns(2), columns):
    with column:
        draw(part, places)
if other_id is not None and (other := get_model(other_id, task=c.view.task)) is not None:
    trace_o: MaskedTrace | None = None
    at_a, failed = None, ""
    try:
        trace_o = probe(masked_fill, other, text, k, compare, index, raising=True)
    except MaskedWordsError as exc:
        failed = str(exc)
    if trace_o is not None and len(trace_o) and P.same_reading(trace, trace_o):
        at_a = probe(masked_fill, other, text, k, compare, index, P.top_ids(trace))
    beside: dict[str, Place] = {}  # each drawn at the full width of its column, keyed by its model's id
    for m in range(len(trace)):
        beside |= {f"cmp-a-{m}": {"key": f"cmp-{model_id}-{m}", "share": 1.0},
                   f"cmp-b-{m}": {"key": f"cmp-{other_id}-{m}", "share": 1.0}, f"cmp-diff-{m}": {"share": 1.0}}
    draw(P.other_model(trace, trace_o, at_a, failed, model_id, other_id, theme(), figure_of), beside)
draw(P.rest(trace, trace_b, model_id, loaded.adapter.name, theme()))
notice(P.NOTICES)
