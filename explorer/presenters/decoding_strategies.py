"""Decoding strategies' presenter: a DecodingRun (one Generation per strategy: n outputs, each with its token ids and
the model's log-probability of each token, (N,)) and the view's settings -> the log-probability lines of every
column's output (a second model's dashed beside them), the settings and the prompt as read, each output's metrics and
text; below, one step's next-token distribution (StepView: the TOP most probable tokens; a second model's after the
same tokens, and the difference), the beam tree, or diversity against quality over samples; what to notice on this
run's own numbers."""
from __future__ import annotations

from collections.abc import Sequence

from explorer.adapters.generation import LABELS, Strategy
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.decoding_strategies import ChatTemplate, DecodingRun, Generation, StepView
from explorer.text.escape import md
from explorer.viz import decoding_strategies as V
from explorer.viz.theme import Theme

SECTIONS = {"step": "One step: the next-token distribution", "beam": "Beam tree",
            "tradeoff": "Diversity and quality over samples"}
SAMPLES = "Metrics of each output, and every sample"  # the expander the page draws `samples` in


def lead(run: DecodingRun) -> str:
    """What each column's text is drawn after: "…" where it continues a decoder's prompt, nothing where it answers a
    chat message or translates a source."""
    return "" if run.is_encoder_decoder or run.chat else "…"


def own(run: DecodingRun) -> Origin:
    """The origin of the charts of this run's log-probabilities."""
    return Origin("model", f"{md(run.model_id)}'s own log-probabilities (T = 1, whatever the strategy sampled from; "
                           f"seed {run.seed}).")


def view_t(gen: Generation) -> float:
    """The temperature the step section opens on: the strategy's own where it samples, else 1."""
    return float(gen.strategy.temperature) if gen.strategy.do_sample else 1.0


def column(gen: Generation, p: Presentation | None = None) -> Presentation:
    """What a column says under its strategy's name: the settings its strategy could not take as given."""
    p = Presentation() if p is None else p
    p.say("warning", *gen.notes)
    return p


def overview(run: DecodingRun, theme: Theme, max_new: int, min_new: int, eos: bool, n: int,
             strategies: Sequence[Strategy], template: ChatTemplate | None = None, unknown: str = "",
             run_b: DecodingRun | None = None, p: Presentation | None = None) -> Presentation:
    """The log-probability of each column's output token by token (run_b: a second model's, dashed), the settings
    every column shares and the prompt as read, what a chat template does (`template`: the model has one), and the
    run's notes (`unknown`: what the columns left out, explorer.probes.decoding_strategies.unknown_note)."""
    p = Presentation() if p is None else p
    p.figure("logprobs", V.logprob_lines([LABELS.get(g.strategy.kind, "") for g in run.generations],
                                         [g.outputs[0].logprobs for g in run.generations], theme, run.prompt_text,
                                         reply=run.chat,
                                         second=None if run_b is None else [g.outputs[0].logprobs
                                                                            for g in run_b.generations],
                                         names=(run.model_id, "" if run_b is None else run_b.model_id),
                                         source=run.is_encoder_decoder),
             own(run) if run_b is None else Origin("model", f"each model's own log-probabilities of its own output "
                                                            f"(T = 1; {md(run.model_id)} solid, {md(run_b.model_id)} "
                                                            f"dashed; seed {run.seed})."),
             "logprobs")
    p.say("caption", V.settings_line(run.seed, max_new, min_new, eos, n, strategies) + " · "
          + V.prompt_line(run.prompt_tokens, run.is_encoder_decoder, run.chat))
    if template is not None:
        p.say("caption", V.chat_line(run.model_id, template, run.chat, run.system, eos))
    p.say("note", *run.notes, unknown)
    return p


def samples(run: DecodingRun, p: Presentation | None = None) -> Presentation:
    """Each column's metrics (its first output's), and every output of every column in full."""
    p = Presentation() if p is None else p
    p.table("metrics", V.metric_columns(run.generations),
            Origin("model", "metrics of each column's output under the model's own distribution."))
    p.say("line", *(f"{gen.strategy.label}: " + " · ".join(f"({i + 1}) {o.text}" if len(gen.outputs) > 1 else o.text
                                                           for i, o in enumerate(gen.outputs))
                    for gen in run.generations))
    return p


def step(gen: Generation, sv: StepView | None, theme: Theme, model_id: str, other_id: str | None = None,
         sv_b: StepView | None = None, at_a: StepView | None = None, p: Presentation | None = None) -> Presentation:
    """One column's distribution at one step (`sv`; None: the column generated no token), after the strategy's
    penalties, with its filter and formula. other_id: the second model's id where it generated too; sv_b: its own
    top tokens after the same context, at_a: its probabilities of the first model's top tokens (both None where it
    does not read the prompt as the same tokens)."""
    p = Presentation() if p is None else p
    if sv is None:
        p.say("note", "This column generated no token.")
        return p
    p.say("caption", "Context: … " + " ".join(sv.context))
    t = sv.step + 1
    origin = Origin("model", f"the model's logits at step {t}, after the strategy's penalties, at T = "
                             f"{sv.temperature:g}; grey: what its filter removes.")
    if sv_b is None or at_a is None or other_id is None:
        p.figure("step_bars", V.step_bars(sv, theme), origin, f"step{t}")
    else:  # both models after the same context (this column's own tokens so far), on one scale
        top = max(float(sv.probs.max()), float(sv_b.probs.max()))
        p.row(("step_bars", V.step_bars(sv, theme, f"{model_id}, step {t}", top=top), origin, f"step{t}"),
              ("step_bars_b", V.step_bars(sv_b, theme, f"{other_id}, same context", top=top),
               Origin("model", f"{md(other_id)}'s own logits after the same tokens, the same penalties and T."),
               f"step{t}-compare"))
        p.figure("step_diff", V.step_difference(sv, at_a, (model_id, other_id), theme),
                 Origin("model", "the difference of the two models' own probabilities of the same tokens."),
                 f"step{t}-difference")
        gap = at_a.probs - sv.probs
        j = int(abs(gap).argmax())
        p.say("caption", f"Both read {model_id}'s output up to step {t}; ★ marks the token {model_id} chose there. "
                         f"{other_id} gives it p = {at_a.chosen_prob:.4f} (rank {at_a.chosen_rank + 1}) against "
                         f"{sv.chosen_prob:.4f}; largest change among {model_id}'s top {len(gap)}: “{sv.tokens[j]}” "
                         f"{float(gap[j]):+.4f}.")
    if other_id is not None and sv_b is None:
        p.say("note", f"No difference at this step: {other_id} does not read this prompt as the same tokens of the "
                      f"same vocabulary as {model_id}.")
    p.say("latex", rf"p(w) = \frac{{\exp(z_w / T)}}{{\sum_{{j=1}}^{{{sv.vocab_size}}} \exp(z_j / T)}}:\quad "
                   rf"z_{{\text{{chosen}}}} = {sv.chosen_logit:.3f},\ T = {sv.temperature:g},\ "
                   rf"\log \sum_j e^{{z_j/T}} = {sv.log_z:.3f},\ "
                   rf"p = e^{{{sv.chosen_logit / sv.temperature:.3f} - {sv.log_z:.3f}}}"
                   rf" = {sv.chosen_prob:.4f}")
    s = gen.strategy
    p.say("latex", {
        "greedy": r"w_t = \arg\max_w z_w",
        "sample": r"w_t \sim p(\cdot)\ \text{(every token kept)}",
        "top-k": rf"V_k = \text{{the }} {s.top_k} \text{{ most probable tokens}}",
        "top-p": rf"V_p = \text{{smallest prefix (by probability) with }} \sum_{{w \in V_p}} p(w) \ge {s.top_p:g}",
        "typical": (rf"\text{{keep tokens closest to the entropy: }} |{{-\log p(w)}} - H(p)| "
                    rf"\text{{ smallest, mass}} \ge {s.typical_p:g}"),
        "min-p": rf"V = \{{w : p(w) \ge {s.min_p:g} \cdot \max_j p(j)\}}",
        "beam": r"\text{keep the } K \text{ prefixes with the largest } \sum_t \log p(w_t \mid w_{<t})",
    }[s.kind])
    p.say("caption", f"Chosen token: {sv.chosen_token} (rank {sv.chosen_rank + 1} of {sv.vocab_size:,}; p = "
                     f"{sv.chosen_prob:.4f} at T = {sv.temperature:g}, {sv.chosen_final:.4f} after the filter). Kept: "
                     f"{sv.n_kept:,} tokens holding {sv.kept_mass:.1%} of the probability; grey bars were removed."
                     + (" Beam search filters nothing here: the beams choose (see the tree)." if s.kind == "beam"
                        else ""))
    return p


def tree(run: DecodingRun, theme: Theme, p: Presentation | None = None) -> Presentation:
    """The first beam-search column's tree: kept, finished and pruned continuations at every step."""
    p = Presentation() if p is None else p
    beams = [(g, g.beam) for g in run.generations if g.beam is not None]
    if not beams:
        p.say("note", "Add Beam search to the strategies to see its tree.")
        return p
    gen, beam = beams[0]
    p.figure("beam_tree", V.beam_tree(beam, theme), own(run), "beam-tree")
    p.say("caption", f"Each step keeps the 2·K best continuations of the running beams by total log-probability: the "
                     f"K best not ending continue (coloured), those ending with the end token or at the length limit "
                     f"join the finished list (diamonds), the rest are pruned (grey). Returned score (sum log p / "
                     f"generated_length^{gen.strategy.length_penalty:g}, Hugging Face's definition): "
                     f"{beam.final_score:.4f}.")
    return p


def summary(run: DecodingRun, p: Presentation | None = None) -> Presentation:
    """Each strategy's samples in numbers: diversity (self-BLEU, distinct-n) and quality (mean log-probability)."""
    p = Presentation() if p is None else p
    rows = V.summary_rows([g.summary() for g in run.generations])
    p.table("summary", {k: [row[k] for row in rows] for k in (rows[0] if rows else {})}, own(run))
    return p


def tradeoff(run: DecodingRun, n: int, x: str, y: str, theme: Theme, p: Presentation | None = None) -> Presentation:
    """Diversity (`x`) against quality (`y`), one point per strategy."""
    p = Presentation() if p is None else p
    if n < 2 and x == "self-BLEU":
        p.say("note", "Self-BLEU needs at least two samples per strategy: raise n.")
    p.figure("tradeoff", V.tradeoff_scatter([g.summary() for g in run.generations], x, y, theme), own(run),
             "tradeoff")
    p.say("caption", "Self-BLEU: mean BLEU-4 of each sample against the others (NLTK's sentence_bleu: modified n-gram "
                     "precision up to 4, brevity penalty, Chen & Cherry smoothing 1 with ε = 0.1, 0 when no word "
                     "matches), 1 = all samples identical. Distinct-n: distinct n-grams / n-grams over all samples. "
                     "Greedy and beam are deterministic: they generate one output, and their metrics are that "
                     "output's. Log-probabilities are the model's own (T = 1, no penalty), whatever the strategy "
                     "used.")
    return p


def present(run: DecodingRun, theme: Theme, max_new: int, min_new: int, eos: bool, n: int,
            strategies: Sequence[Strategy], section: str, col: int = 0, sv: StepView | None = None,
            x: str = "self-BLEU", y: str = "mean log-prob", template: ChatTemplate | None = None, unknown: str = "",
            run_b: DecodingRun | None = None, sv_b: StepView | None = None,
            at_a: StepView | None = None) -> Presentation:
    """The whole view in the page's order: each column's warnings, the overview (see there), every output, and the
    section "step" (column `col` at the step of `sv`, a second model's `sv_b` and `at_a` beside it: see step),
    "beam" or "tradeoff" (`x` against `y`)."""
    p = Presentation()
    for gen in run.generations:
        column(gen, p)
    overview(run, theme, max_new, min_new, eos, n, strategies, template, unknown, run_b, p)
    samples(run, p)
    if section == "step":
        step(run.generations[col], sv, theme, run.model_id, None if run_b is None else run_b.model_id, sv_b, at_a,
             p)
    elif section == "beam":
        tree(run, theme, p)
    else:
        summary(run, p)
        tradeoff(run, n, x, y, theme, p)
    return p


def notices(run: DecodingRun) -> list[str]:
    """What to notice, with this run's own numbers for greedy and beam search."""
    summaries = [g.summary() for g in run.generations]  # the numbers the first point quotes, this run's own
    fixed = [s for s in summaries if s["deterministic"]]
    sampled = [s["mean log-prob"] for s in summaries if not s["deterministic"]]
    if fixed:
        fixed_point = ("Greedy and beam search pick likely tokens: mean log-probability here "
                       + ", ".join(f"{s['strategy']} {s['mean log-prob']:.3f}" for s in fixed)
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
