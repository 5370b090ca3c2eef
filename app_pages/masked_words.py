"""Masked-word prediction (BERT's pre-training task): the top-k fillers of each [MASK], two sentences side by side."""
import streamlit as st

from explorer.probes.masked_words import MASK, MaskedWordsError, masked_fill, words_of
from explorer.text.escape import md
from explorer.ui import settings
from explorer.ui.cache import figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.charts import Origin, caption, show
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import masked_words as V

c = Controls("masked-words")
page_header("Masked-word prediction",
            f"BERT's pre-training task: hide a word behind {MASK} and see which words the model puts there, with its "
            "own probabilities. A masked language model reads the sentence from both sides.")
theme = settings.theme()

model_id, loaded, text = model_and_sentence(c, task=c.view.task,
                                            help=f"Type {md(MASK)} (or {md('<mask>')}) where a word should be.")
words = words_of(text)
c1, c2, c_cmp, c3 = st.columns([1.6, 1.9, 1.5, 1.2], vertical_alignment="bottom")  # labels whole at 20 px
with c1:
    index = c.token("mask", words, -1, [-1, *range(len(words))], label_visibility="collapsed",  # follows the text
                    format_func=lambda i: f"the {MASK}s typed" if i < 0 else f"mask {i}: {words[i]}")
with c2:
    second = c.text_input("b", max_chars=2000, label_visibility="collapsed",
                          placeholder="Second sentence, side by side (empty: none)")
with c_cmp:
    other_id = compare_picker(c.view.needs, model_id, same_tokens=True, label_visibility="collapsed")
with c3, st.popover("Options", icon=":material/tune:", width="stretch"):
    compare = c.text_input("words", max_chars=200)
    k = c.number("k")

trace = probe(masked_fill, loaded, text, k, compare, index)  # a MaskedWordsError: said, the page stops
for note in trace.notes:
    st.info(V.plain(note))
if not len(trace):
    st.stop()

traces, names = [trace], ["A"]
if second.strip():
    trace_b = probe(masked_fill, loaded, second, k, compare, -1)
    for note in trace_b.notes:
        st.info("Sentence B: " + V.plain(note))
    if len(trace_b):
        traces, names = [trace, trace_b], ["A", "B"]

OWN = Origin("model", f"softmax of {md(model_id)}'s own logits at each {MASK}, over its {trace.vocab_size:,} tokens.")


def bars(tr, m: int, title: str = "", top: float | None = None):
    """The top-k bars of mask m of a trace, built once per trace, mask, title and scale."""
    return figure_of(V.fill_bars, tr, m, theme, title, top)


if len(traces) == 2:
    for col, tr, name in zip(st.columns(2), traces, names):
        with col:
            caption(f"**{name}** as the model reads it: {V.sentence_text(tr)}")
            for m in range(len(tr)):
                show(bars(tr, m, f"{name}: {MASK} at token {tr.positions[m]}"), OWN, key=f"fill-{name}-{m}",
                     filename=f"masked-{name}-{m}", fold=V.FOLD if m == 0 else False, share=0.5)
else:
    caption("**A** as the model reads it: " + V.sentence_text(trace))
    cols = st.columns(2)
    for m in range(len(trace)):
        with cols[m % 2]:
            show(bars(trace, m), OWN, key=f"fill-A-{m}", filename=f"masked-{m}", fold=V.FOLD if m < 2 else False,
                 share=0.5)
if other_id is not None and (other := get_model(other_id, task=c.view.task)) is not None:
    st.subheader(f"Compared with {md(other_id)}")  # the same sentence A, the same masks
    try:
        trace_o = probe(masked_fill, other, text, k, compare, index, raising=True)
        why = "" if len(trace_o) else " ".join(trace_o.notes)
    except MaskedWordsError as exc:
        why = str(exc)
    if why:
        st.warning(f"{md(other_id)} cannot be compared here: " + V.plain(why))
    else:
        same = trace_o.tokens == trace.tokens and trace_o.vocab_size == trace.vocab_size
        at_a = probe(masked_fill, other, text, k, compare, index,
                     tuple(tuple(int(i) for i in row) for row in trace.top_ids)) if same else None
        OTHER = Origin("model", f"softmax of {md(other_id)}'s own logits at each {MASK}.")
        for m in range(min(len(trace), len(trace_o))):
            top = max(float(trace.probs[m].max()), float(trace_o.probs[m].max()))
            row = st.columns(3 if at_a is not None else 2)
            for col, tr, name, origin in zip(row, (trace, trace_o), (model_id, other_id), (OWN, OTHER)):
                with col:
                    show(bars(tr, m, f"{name}: {MASK} at token {tr.positions[m]}", top=top), origin,
                         key=f"cmp-{name}-{m}", filename=f"masked-{m}-{'b' if tr is trace_o else 'a'}")
            if at_a is not None:
                with row[2]:
                    show(V.fill_difference(trace, at_a, m, (model_id, other_id), theme),
                         Origin("model", "the difference of the two models' own probabilities of the same tokens."),
                         key=f"cmp-diff-{m}", filename=f"masked-{m}-difference")
        if at_a is None:
            st.info(f"No difference is drawn: {md(other_id)} does not read this sentence as the same tokens of the "
                    f"same vocabulary as {md(model_id)}.")
        else:
            m, j, gap = V.largest_change(trace, at_a)
            caption(f"Both bars on one scale. Largest change among {md(model_id)}'s top {trace.probs.shape[1]} at "
                       f"each {MASK}: “{V.token_text(trace, m, j)}” {gap:+.4f} (p = {float(trace.probs[m, j]):.4f} "
                       f"in {md(model_id)}, {float(at_a.probs[m, j]):.4f} in {md(other_id)}).")
caption(f"{md(model_id)} · {md(loaded.adapter.name)} · bidirectional: every token attends to every other, so "
           f"the words after each {MASK} count as much as the words before it.")

if any(tr.words for tr in traces):
    st.subheader("Compared words")
    show(V.word_bars(traces, names, theme), OWN, key="compared-chart", filename="masked-words")
    best = [(n, tr.words[0], float(tr.word_probs[0, 0]), int(tr.word_ranks[0, 0]))
            for n, tr in zip(names, traces) if tr.words and tr.pieces[0]]
    if best:
        caption("Live: " + "; ".join(f"in {n}, “{V.plain(w)}” gets p = {p:.4f} (rank {r:,} of "
                                        f"{trace.vocab_size:,})" for n, w, p, r in best) + ".")

st.subheader("Where the probabilities come from")
st.latex(V.equation(trace, 0))
caption(f"z_v is the model's output score (logit) for token v at the first {MASK} of A: its last layer's vector "
           f"there, through the output layer. The most probable token, “{V.token_text(trace, 0)}”, "
           f"has z = {trace.logits[0, 0]:.3f}; the softmax divides e^z by the sum over all {trace.vocab_size:,} "
           f"tokens (log of the sum {trace.lse[0]:.3f}). The distribution's entropy is {trace.entropy[0]:.3f} nats. "
           "Hover a bar for its token's logit and rank.")

what_to_notice([
    f"Agreement from both sides: in “the keys to the cabinet {MASK} on the table” the verb agrees with “keys”, "
    "not with the nearer “cabinet”; swap the numbers in sentence B and the plural and singular verbs trade places.",
    "The words after the mask matter: a causal language model could not use “on the table” to choose a verb.",
    "Each mask is filled independently: with two masks the model does not see its own guess for the other one.",
    "Pick a word to mask from the menu: the hidden word is compared automatically, with its rank among all tokens.",
])
