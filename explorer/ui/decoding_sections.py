"""The decoding view's sections under its columns and chart, called by its page: one step's next-token
distribution (and a second model's after the same tokens), the beam tree, diversity against quality over samples,
and what to notice on this run's own numbers."""
from __future__ import annotations

import streamlit as st

from explorer.loading.loaders import LoadedModel
from explorer.probes import decoding_strategies as D
from explorer.text.escape import md
from explorer.ui.cache import probe
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.state import Controls
from explorer.viz import decoding_strategies as V
from explorer.viz.theme import Theme

SECTIONS = {"step": "One step: the next-token distribution", "beam": "Beam tree",
            "tradeoff": "Diversity and quality over samples"}


def step_section(c: Controls, loaded: LoadedModel, run: D.DecodingRun, other: LoadedModel | None,
                 run_b: D.DecodingRun | None, model_id: str, other_id: str | None, theme: Theme) -> None:
    """One column's distribution at one step, after the strategy's penalties, with its filter and formula."""
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


def tree_section(run: D.DecodingRun, own: Origin, theme: Theme) -> None:
    """The first beam-search column's tree: kept, finished and pruned continuations at every step."""
    beams = [(g, g.beam) for g in run.generations if g.beam is not None]
    if not beams:
        st.info("Add Beam search to the strategies to see its tree.")
        return
    gen, beam = beams[0]
    show(V.beam_tree(beam, theme), own, key="beam_tree", filename="beam-tree")
    caption(f"Each step keeps the 2·K best continuations of the running beams by total log-probability: the K "
            f"best not ending continue (coloured), those ending with the end token or at the length limit join "
            f"the finished list (diamonds), the rest are pruned (grey). Returned score (sum log p / "
            f"generated_length^{gen.strategy.length_penalty:g}, Hugging Face's definition): "
            f"{beam.final_score:.4f}.")


def tradeoff_section(c: Controls, run: D.DecodingRun, n: int, own: Origin, theme: Theme) -> None:
    """Each strategy's samples: diversity (self-BLEU, distinct-n) against quality (mean log-probability)."""
    rows = [g.summary() for g in run.generations]
    table(V.summary_rows(rows), own)
    x1, x2 = st.columns(2)
    with x1:
        x_axis: str = c.radio("x")
    with x2:
        y_axis: str = c.radio("y")
    if n < 2 and x_axis == "self-BLEU":
        st.info("Self-BLEU needs at least two samples per strategy: raise n.")
    show(V.tradeoff_scatter(rows, x_axis, y_axis, theme), own, key="tradeoff", filename="tradeoff")
    caption("Self-BLEU: mean BLEU-4 of each sample against the others (NLTK's sentence_bleu: modified n-gram "
               "precision up to 4, brevity penalty, Chen & Cherry smoothing 1 with ε = 0.1, 0 when no word matches), 1 "
               "= all samples identical. Distinct-n: distinct n-grams / n-grams over all samples. Greedy and beam are "
               "deterministic: they generate one output, and their metrics are that output's. Log-probabilities are "
               "the model's own (T = 1, no penalty), whatever the strategy used.")


def notices(run: D.DecodingRun) -> list[str]:
    """What to notice, with this run's own numbers for greedy and beam search."""
    summaries = [g.summary() for g in run.generations]  # the numbers the first point quotes, this run's own
    fixed = [s for s in summaries if s["deterministic"]]
    sampled = [s["mean log-prob"] for s in summaries if not s["deterministic"]]
    if fixed:
        fixed_point = ("Greedy and beam search pick likely tokens: mean log-probability here "
                       + ", ".join(f"{md(s['strategy'])} {s['mean log-prob']:.3f}" for s in fixed)
                       + (f", against {min(sampled):.3f} to {max(sampled):.3f} for the sampling columns"
                          if sampled else "")
                       + "; they give one output whatever n, so self-BLEU does not apply to them (the chart draws "
                       "their quality as a line). Long outputs of theirs can fall into repetition loops (raise New "
                       "tokens): their repetition rate here is "
                       + ", ".join(f"{s['repetition rate']:.3f}" for s in fixed) + ".")
    else:
        fixed_point = ("Greedy and beam search give one output whatever n, so self-BLEU does not apply to them; add "
                       "one to compare its mean log-probability with the sampling columns'.")
    return [

        fixed_point,
        "Pure sampling at T = 1 is diverse but wanders into unlikely tokens; top-k, top-p, typical and min-p cut the "
        "unreliable tail (the grey bars) and trade a little diversity for likelier text.",
        "Top-k keeps a fixed number of tokens whatever the shape of the distribution; top-p adapts: few tokens when "
        "the model is sure, many when it is not (move the step slider).",
        "Lower the view's temperature: the distribution sharpens and top-p keeps fewer tokens.",
        "A repetition penalty or no-repeat n-gram size breaks greedy/beam loops, at some cost in log-probability.",
    ]
