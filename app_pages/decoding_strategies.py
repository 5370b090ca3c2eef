"""Decoding strategies side by side: greedy, temperature, top-k, top-p, typical, min-p and beam search."""
import streamlit as st

from explorer.loading.catalogue import builtin_names
from explorer.adapters.generation import LABELS, Strategy
from explorer.text.escape import md, md_message
from explorer.probes import decoding_strategies as D
from explorer.runtime.errors import ViewError
from explorer.ui import settings
from explorer.ui.cache import get_model, probe, probe_raising, probe_with_progress
from explorer.ui.compare import compare_picker
from explorer.ui.state import Controls
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.widgets import model_picker, model_sentence, page_header, reads_on_enter, top_row, what_to_notice
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
    model_id = model_picker(c.view.families, default=default_model)
    loaded = get_model(model_id)
if loaded is None:
    st.stop()
template = probe(D.chat_template, loaded)  # None: the tokenizer has no chat template
sized = D.first_open(loaded)  # a large model opens with fewer new tokens and samples

# ------------------------------------------------------------------------------------------- settings
if template is not None:
    c_kinds, c_chat, c_cmp, c_settings = st.columns([3.2, 1.5, 1.6, 1], vertical_alignment="bottom")
    with c_chat:
        chat = c.toggle("chat")
else:
    c_kinds, c_cmp, c_settings = st.columns([3.6, 1.6, 1], vertical_alignment="bottom")
    chat = False
with c_cmp:
    other_id = compare_picker(c.view.families, model_id, label_visibility="collapsed")
with col_text:  # drawn above the row: an instruct model's message in chat mode, else a prompt to continue
    text = model_sentence(loaded, "chat" if chat else c.view.sentences, label="Message (a user turn)" if chat
                          else "Prompt", on_enter=reads_on_enter(c.view, loaded))
with c_kinds:
    chosen = c.multiselect("strategies", format_func=LABELS.get, label_visibility="collapsed")  # at most 6
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
             min_new_tokens=min_new)
    for kind in chosen
)


LEAD = "" if loaded.adapter.is_encoder_decoder or chat else "…"  # a decoder's columns continue the prompt


def so_far(shown: tuple[tuple[str, str], ...]) -> None:
    """Each strategy's text as it is generated (its first sample, or its best running beam), in its column."""
    for col, (label, generated) in zip(st.columns(len(shown)), shown):
        col.markdown(f"**{md(label)}**\n\n{md(LEAD + generated)} ▌")


run = probe_with_progress(D.decode_all, loaded, text, strategies, seed, max_new, n, stop_eos, chat,
                          system if chat else "", partial=so_far, heavy=True)
OWN = Origin("model", f"{md(model_id)}'s own log-probabilities (T = 1, whatever the strategy sampled from; seed "
                      f"{seed}).")
# -------------------------------------------------------------------------------------------- columns
cols = st.columns(len(run.generations))
for col, gen in zip(cols, run.generations):
    with col:
        st.markdown(f"**{LABELS.get(gen.strategy.kind)}** :gray[{md(gen.strategy.params_text)}]")
        for note in gen.notes:
            st.warning(md_message(note))
        out = gen.outputs[0]
        st.html(V.tokens_html("" if run.is_encoder_decoder or run.chat else "…", out.tokens, out.logprobs,
                              max_lines=V.OUTPUT_LINES))
run_b = None  # the second model (?compare=): the same prompt, strategies, seed and settings
other = get_model(other_id) if other_id is not None else None
if other is not None:
    try:
        if chat and probe(D.chat_template, other) is None:
            raise D.DecodingError("it has no chat template to read the message with (turn Chat template off).")
        run_b = probe_raising(D.decode_all, other, text, strategies, seed, max_new, n, stop_eos, chat,
                              system if chat else "", heavy=True)
    except ViewError as exc:
        st.warning(f"{md(other_id)} cannot be compared here: {md_message(exc)}")
    else:
        st.markdown(f"**Compared with {md(other_id)}** (same prompt, strategies, seed and settings):")
        for col, gen in zip(st.columns(len(run_b.generations)), run_b.generations):
            with col:
                st.html(V.tokens_html("" if run_b.is_encoder_decoder or run_b.chat else "…", gen.outputs[0].tokens,
                                      gen.outputs[0].logprobs, max_lines=V.OUTPUT_LINES))
theme = settings.theme()
show(V.logprob_lines([LABELS.get(g.strategy.kind, "") for g in run.generations],
                     [g.outputs[0].logprobs for g in run.generations], theme, run.prompt_text, reply=run.chat,
                     second=None if run_b is None else [g.outputs[0].logprobs for g in run_b.generations],
                     names=(model_id, other_id or "")),
     OWN if run_b is None else Origin("model", f"each model's own log-probabilities of its own output (T = 1; "
                                               f"{md(model_id)} solid, {md(other_id)} dashed; seed {seed})."),
     key="logprobs", filename="logprobs", fold=V.FOLD)
caption(md_message(V.settings_line(seed, max_new, min_new, stop_eos, n, strategies)
                      + " · " + V.prompt_line(run.prompt_tokens, run.is_encoder_decoder, run.chat)))
if template is not None:
    caption(md_message(V.chat_line(model_id, template, run.chat, run.system, stop_eos)))
for note in run.notes:  # what the model read (e.g. an empty prompt), under the chart: it keeps the first screen
    st.info(md_message(note))
with st.expander("Metrics of each output, and every sample"):
    table(V.metric_columns(run.generations), Origin("model", "metrics of each column's output under the model's own "
                                                             "distribution."))
    for gen in run.generations:  # every output in full (the columns above scroll after a few lines)
        st.markdown(f"**{gen.strategy.label}**: " + " · ".join(f"({i + 1}) {md(o.text)}" if len(gen.outputs) > 1
                                                             else md(o.text) for i, o in enumerate(gen.outputs)))

SECTIONS = {"step": "One step: the next-token distribution", "beam": "Beam tree",
            "tradeoff": "Diversity and quality over samples"}
section = c.radio("section", format_func=SECTIONS.get, label_visibility="collapsed")
# ------------------------------------------------------------------------------------------- per step
if section == "step":
    labels = [g.strategy.label for g in run.generations]
    which = c.selectbox("col", list(range(len(labels))), format_func=lambda i: labels[i])
    gen = run.generations[which]
    out = gen.outputs[0]
    if not out.ids:
        st.info("This column generated no token.")
    else:
        s1, s2 = st.columns(2)
        with s1:
            step = c.token("step", out.tokens, c.params["step"].default, first=1, slider=True,  # follows the output
                           hi=max(len(out.ids), 2))
            step = min(step, len(out.ids))
        with s2:
            view_t = c.number("view_t", slider=True,
                              default=float(gen.strategy.temperature) if gen.strategy.do_sample else 1.0)
        sv = probe(D.step_view, loaded, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t)
        caption("Context: … " + md(" ".join(sv.context)))
        same = other is not None and run_b is not None and run_b.prompt_ids == run.prompt_ids and \
            D.generator(other).vocab_size == sv.vocab_size
        sv_b = probe(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t) \
            if same and other is not None else None
        STEP = Origin("model", f"the model's logits at step {step}, after the strategy's penalties, at T = "
                               f"{sv.temperature:g}; grey: what its filter removes.")
        if sv_b is None or other is None:
            show(V.step_bars(sv, theme), STEP, key="step_bars", filename=f"step{step}")
        else:  # both models after the same context (this column's own tokens so far), on one scale
            top = max(float(sv.probs.max()), float(sv_b.probs.max()))
            a_col, b_col = st.columns(2)
            with a_col:
                show(V.step_bars(sv, theme, f"{model_id}, step {step}", top=top), STEP, key="step_bars",
                     filename=f"step{step}")
            with b_col:
                show(V.step_bars(sv_b, theme, f"{other_id}, same context", top=top),
                     Origin("model", f"{md(other_id)}'s own logits after the same tokens, the same penalties and T."),
                     key="step_bars_b", filename=f"step{step}-compare")
            at_a = probe(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, step - 1, view_t,
                         ids=tuple(int(i) for i in sv.ids))
            show(V.step_difference(sv, at_a, (model_id, other.id), theme),
                 Origin("model", "the difference of the two models' own probabilities of the same tokens."),
                 key="step_diff", filename=f"step{step}-difference")
            gap = at_a.probs - sv.probs
            caption(f"Both read {md(model_id)}'s output up to step {step}; ★ marks the token {md(model_id)} chose "
                       f"there. {md(other_id)} gives it p = {at_a.chosen_prob:.4f} (rank {at_a.chosen_rank + 1}) "
                       f"against {sv.chosen_prob:.4f}; largest change among {md(model_id)}'s top {len(gap)}: "
                       f"“{md(sv.tokens[int(abs(gap).argmax())])}” {float(gap[int(abs(gap).argmax())]):+.4f}.")
        if run_b is not None and sv_b is None:
            st.info(f"No difference at this step: {md(other_id)} does not read this prompt as the same tokens of the "
                    f"same vocabulary as {md(model_id)}.")
        st.latex(
            rf"p(w) = \frac{{\exp(z_w / T)}}{{\sum_{{j=1}}^{{{sv.vocab_size}}} \exp(z_j / T)}}:\quad "
            rf"z_{{\text{{chosen}}}} = {sv.chosen_logit:.3f},\ T = {sv.temperature:g},\ "
            rf"\log \sum_j e^{{z_j/T}} = {sv.log_z:.3f},\ "
            rf"p = e^{{{sv.chosen_logit / sv.temperature:.3f} - {sv.log_z:.3f}}}"
            rf" = {sv.chosen_prob:.4f}"
        )
        kind = gen.strategy.kind
        rule = {
            "greedy": r"w_t = \arg\max_w z_w",
            "sample": r"w_t \sim p(\cdot)\ \text{(every token kept)}",
            "top-k": rf"V_k = \text{{the }} {gen.strategy.top_k} \text{{ most probable tokens}}",
            "top-p": (rf"V_p = \text{{smallest prefix (by probability) with }} \sum_{{w \in V_p}} p(w) "
                      rf"\ge {gen.strategy.top_p:g}"),
            "typical": (rf"\text{{keep tokens closest to the entropy: }} |{{-\log p(w)}} - H(p)| "
                        rf"\text{{ smallest, mass}} \ge {gen.strategy.typical_p:g}"),
            "min-p": rf"V = \{{w : p(w) \ge {gen.strategy.min_p:g} \cdot \max_j p(j)\}}",
            "beam": r"\text{keep the } K \text{ prefixes with the largest } \sum_t \log p(w_t \mid w_{<t})",
        }[kind]
        st.latex(rule)
        caption(f"Chosen token: **{md(sv.chosen_token)}** (rank {sv.chosen_rank + 1} of {sv.vocab_size:,}; "
                   f"p = {sv.chosen_prob:.4f} at T = {sv.temperature:g}, {sv.chosen_final:.4f} after the filter). "
                   f"Kept: {sv.n_kept:,} tokens holding {sv.kept_mass:.1%} of the probability; grey bars were removed."
                   + (" Beam search filters nothing here: the beams choose (see the tree)." if kind == "beam" else ""))

elif section == "beam":
    # ------------------------------------------------------------------------------------------- beam tree
    beam_gens = [g for g in run.generations if g.beam is not None]
    if not beam_gens:
        st.info("Add Beam search to the strategies to see its tree.")
    else:
        show(V.beam_tree(beam_gens[0].beam, theme), OWN, key="beam_tree", filename="beam-tree")
        caption(f"Each step keeps the 2·K best continuations of the running beams by total log-probability: the K "
                   f"best not ending continue (coloured), those ending with the end token or at the length limit join "
                   f"the finished list (diamonds), the rest are pruned (grey). Returned score (sum log p / "
                   f"generated_length^{beam_gens[0].strategy.length_penalty:g}, Hugging Face's definition): "
                   f"{beam_gens[0].beam.final_score:.4f}.")

else:
    # ------------------------------------------------------------------------------------------- trade-off
    rows = [g.summary() for g in run.generations]
    table(V.summary_rows(rows), OWN)
    x1, x2 = st.columns(2)
    with x1:
        x_axis = c.radio("x")
    with x2:
        y_axis = c.radio("y")
    if n < 2 and x_axis == "self-BLEU":
        st.info("Self-BLEU needs at least two samples per strategy: raise n.")
    show(V.tradeoff_scatter(rows, x_axis, y_axis, theme), OWN, key="tradeoff", filename="tradeoff")
    caption("Self-BLEU: mean BLEU-4 of each sample against the others (NLTK's sentence_bleu: modified n-gram "
               "precision up to 4, brevity penalty, Chen & Cherry smoothing 1 with ε = 0.1, 0 when no word matches), 1 "
               "= all samples identical. Distinct-n: distinct n-grams / n-grams over all samples. Greedy and beam are "
               "deterministic: they generate one output, and their metrics are that output's. Log-probabilities are "
               "the model's own (T = 1, no penalty), whatever the strategy used.")

summaries = [g.summary() for g in run.generations]  # the numbers the first point quotes, this run's own
fixed = [s for s in summaries if s["deterministic"]]
sampled = [s["mean log-prob"] for s in summaries if not s["deterministic"]]
if fixed:
    FIXED = ("Greedy and beam search pick likely tokens: mean log-probability here "
             + ", ".join(f"{md(s['strategy'])} {s['mean log-prob']:.3f}" for s in fixed)
             + (f", against {min(sampled):.3f} to {max(sampled):.3f} for the sampling columns" if sampled else "")
             + "; they give one output whatever n, so self-BLEU does not apply to them (the chart draws their quality "
             "as a line). Long outputs of theirs can fall into repetition loops (raise New tokens): their repetition "
             "rate here is " + ", ".join(f"{s['repetition rate']:.3f}" for s in fixed) + ".")
else:
    FIXED = ("Greedy and beam search give one output whatever n, so self-BLEU does not apply to them; add one to "
             "compare its mean log-probability with the sampling columns'.")
what_to_notice([
    FIXED,
    "Pure sampling at T = 1 is diverse but wanders into unlikely tokens; top-k, top-p, typical and min-p cut the "
    "unreliable tail (the grey bars) and trade a little diversity for likelier text.",
    "Top-k keeps a fixed number of tokens whatever the shape of the distribution; top-p adapts: few tokens when "
    "the model is sure, many when it is not (move the step slider).",
    "Lower the view's temperature: the distribution sharpens and top-p keeps fewer tokens.",
    "A repetition penalty or no-repeat n-gram size breaks greedy/beam loops, at some cost in log-probability.",
])
