"""Decoding strategies side by side: greedy, temperature, top-k, top-p, typical, min-p and beam search."""
import streamlit as st

from explorer.loading.catalogue import builtin_names
from explorer.adapters.generation import LABELS, DecodingError, Strategy
from explorer.presenters import decoding_strategies as P
from explorer.text.escape import md, md_message
from explorer.probes import decoding_strategies as D
from explorer.runtime.errors import ViewError
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import caption
from explorer.ui.compare import compare_picker
from explorer.ui.present import draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_picker, model_sentence, page_header, reads_on_enter, top_row
from explorer.viz import decoding_strategies as V

c = Controls("decoding-strategies")
page_header("Decoding strategies side by side",
            "The same prompt and seed through greedy, temperature sampling, top-k, top-p, typical-p, min-p and "
            "beam search, with Hugging Face's own logits processors, the distribution at every step and metrics.")

declared = c.params["model"].default  # pretrained:smollm2 when installed (explorer/views.py), else the built-in GPT
default_model = declared if not declared.startswith("builtin:") or declared.removeprefix("builtin:") in \
    builtin_names() else "builtin:lstm-lm-wordnet"
col_model, col_text = top_row()
with col_model:
    model_id = model_picker(c.view.needs, default=default_model)
    loaded = get_model(model_id)
if loaded is None:
    st.stop()
template = probe(D.chat_template, loaded)  # None: the tokenizer has no chat template
sized = D.first_open(loaded)  # a large model opens with fewer new tokens and samples

# ------------------------------------------------------------------------------------------- settings
if template is not None:
    c_kinds, c_chat, c_cmp, c_settings = st.columns([2.6, 1.9, 1.9, 1.4], vertical_alignment="bottom")  # whole
    # labels at the projector's 18-20 px beside a lesson panel (1280 px)
    with c_chat:
        chat = c.toggle("chat")
else:
    c_kinds, c_cmp, c_settings = st.columns([3.2, 1.7, 1.3], vertical_alignment="bottom")
    chat = False
with c_cmp:
    other_id = compare_picker(c.view.needs, model_id, label_visibility="collapsed")
with col_text:  # drawn above the row: an instruct model's message in chat mode, else a prompt to continue
    text = model_sentence(loaded, "chat" if chat else c.view.sentences, label="Message (a user turn)" if chat
                          else "Prompt", on_enter=reads_on_enter(c.view, loaded))
with c_kinds:
    chosen: list[str] = c.multiselect("strategies", format_func=LABELS.get, label_visibility="collapsed")  # at most 6
with c_settings, st.popover("Settings", icon=":material/tune:", width="stretch"):
    system = ""
    if template is not None:
        own = (f"empty: the template's own, “{template.default_system}”" if template.default_system else
               "empty: none (the template adds no system prompt)") if template.system_ok else \
            "this template takes no system message"
        system = c.text_input("system", max_chars=D.MAX_SYSTEM, placeholder=own, disabled=not chat)
        if chat:  # raw text has no system prompt: nothing to say about one
            caption(f"System prompt: {md_message(own)}.")
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        seed = int(c.number("seed"))
        max_new = c.number("max_new", slider=True, default=sized.get("max_new"))
        min_new = c.number("min_new", slider=True, hi=max_new)
        stop_eos = c.toggle("eos")
        unk = c.toggle("unk", disabled=not D.has_unknown_word(loaded))
    with c2:
        temperature = c.number("temperature", slider=True)
        n = c.number("n", slider=True, default=sized.get("n"))
        rep = c.number("rep", slider=True)
    with c3:
        k = c.number("k", slider=True)
        p = c.number("p", slider=True)
        typical = c.number("typical", slider=True)
    with c4:
        min_p = c.number("minp", slider=True)
        beams = c.number("beam", slider=True)
        length_penalty = c.number("lp", slider=True)
        ngram = c.number("ngram", slider=True)

if not chosen:
    st.info("Choose at least one strategy (two to six to compare).")
    st.stop()
if len(chosen) < 2:
    st.info("Choose a second strategy to compare side by side.")
strategies = tuple(
    Strategy(kind, temperature=temperature, top_k=k, top_p=p, typical_p=typical, min_p=min_p, num_beams=beams,
             length_penalty=length_penalty, repetition_penalty=rep, no_repeat_ngram_size=ngram,
             min_new_tokens=min_new, show_unknown=unk)
    for kind in chosen
)


LEAD = "" if loaded.adapter.is_encoder_decoder or chat else "…"  # a decoder's columns continue the prompt


def so_far(shown: tuple[tuple[str, str], ...]) -> None:
    """Each strategy's text as it is generated (its first sample, or its best running beam), in its column."""
    for col, (label, generated) in zip(st.columns(len(shown)), shown):
        col.markdown(f"**{md(label)}**\n\n{md(LEAD + generated)} ▌")


run = probe(D.decode_all, loaded, text, strategies, seed, max_new, n, stop_eos, chat, system if chat else "",
            partial=so_far, heavy=True, progress=True)
# -------------------------------------------------------------------------------------------- columns
for col, gen in zip(st.columns(len(run.generations)), run.generations):
    with col:
        st.markdown(f"**{LABELS.get(gen.strategy.kind)}** :gray[{md(gen.strategy.params_text)}]")
        draw(P.column(gen))
        out = gen.outputs[0]
        st.html(V.tokens_html(P.lead(run), out.tokens, out.logprobs, max_lines=V.OUTPUT_LINES))
run_b = None  # the second model (?compare=): the same prompt, strategies, seed and settings
other = get_model(other_id) if other_id is not None else None
if other is not None:
    try:
        if chat and probe(D.chat_template, other) is None:
            raise DecodingError("it has no chat template to read the message with (turn Chat template off).")
        run_b = probe(D.decode_all, other, text, strategies, seed, max_new, n, stop_eos, chat,
                      system if chat else "", heavy=True, raising=True)
    except ViewError as exc:
        st.warning(f"{md(other_id)} cannot be compared here: {md_message(exc)}")
    else:
        st.markdown(f"**Compared with {md(other_id)}** (same prompt, strategies, seed and settings):")
        for col, gen in zip(st.columns(len(run_b.generations)), run_b.generations):
            with col:
                st.html(V.tokens_html(P.lead(run_b), gen.outputs[0].tokens, gen.outputs[0].logprobs,
                                      max_lines=V.OUTPUT_LINES))
draw(P.overview(run, theme(), max_new, min_new, stop_eos, n, strategies, template,
                D.unknown_note(loaded, run.generations), run_b), {"logprobs": {"fold": V.FOLD}})
with st.expander(P.SAMPLES):
    draw(P.samples(run))

section: str = c.radio("section", format_func=P.SECTIONS.get, label_visibility="collapsed")
if section == "step":
    labels = [g.strategy.label for g in run.generations]
    which = c.selectbox("col", list(range(len(labels))), format_func=lambda i: labels[i])
    gen = run.generations[which]
    out = gen.outputs[0]
    sv = sv_b = at_a = None
    if out.ids:
        s1, s2 = st.columns(2)
        with s1:
            step = c.token("step", out.tokens, c.params["step"].default, first=1, slider=True,  # follows the output
                           hi=max(len(out.ids), 2))
            step = min(step, len(out.ids))
        with s2:
            view_t = c.number("view_t", slider=True, default=P.view_t(gen))
        sv = probe(D.step_view, loaded, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t)
        if other is not None and run_b is not None and D.reads_alike(other, run, run_b, sv.vocab_size):
            sv_b = probe(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t)
            at_a = probe(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t,
                         ids=tuple(int(i) for i in sv.ids))
    draw(P.step(gen, sv, theme(), model_id, None if run_b is None else run_b.model_id, sv_b, at_a),
         {"step_bars": {"share": 1.0}, "step_bars_b": {"share": 1.0}})
elif section == "beam":
    draw(P.tree(run, theme()))
else:
    draw(P.summary(run))
    x1, x2 = st.columns(2)
    with x1:
        x_axis: str = c.radio("x")
    with x2:
        y_axis: str = c.radio("y")
    draw(P.tradeoff(run, n, x_axis, y_axis, theme()))
notice(P.notices(run))
