"""The recurrent cell's presenter: a GateTrace (gates: name -> (layers, directions, T, H)) and the view's settings ->
the token × unit heatmap of one state (a second model's beside it, a training step's units in the trained model's
order), what the view read from the model, and the four sections: one unit through the sentence with the cell's
equations, gate saturation, next tokens (T, k), two sentences compared (T, H); and what to notice.

The page draws each part where its widgets leave room (`opening`, `heatmaps`, `inferred`, then the section's parts);
`present` joins the same parts for the notebook. Origin details are Markdown (the badge reads them): the tokens and
ids in them are escaped."""
from __future__ import annotations

import numpy as np

from explorer.adapters.protocols import Loaded
from explorer.adapters.task_head import not_a_language_model
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.lstm_gates import (LABELS, GateNotice, GateTrace, cell_terms, compare, gate_notice,
                                        model_difference, saturation, unit_order)
from explorer.text.escape import md
from explorer.views import BY_PATH
from explorer.viz import lstm_gates as viz
from explorer.viz.theme import Theme

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
FIRST_PAIR = next(iter(PAIRS.values()))  # what to notice is computed on it (dog / dogs)
SECTIONS = BY_PATH["lstm-gates"].params["section"].choices  # one unit + equations, saturation, next tokens, compare
READ = Origin("model", "read from the checkpoint's weights and their shapes.")
UNKNOWN = "Unknown words are read as <unk>: the same embedding for every unknown word."
KEEPS = {"f": "Forget gates near 1 keep the cell state (cₜ = f ⊙ cₜ₋₁ + i ⊙ g)",
         "z": "Update gates near 1 keep the hidden state (hₜ = (1 − z) ⊙ n + z ⊙ hₜ₋₁)",
         "": "No gate keeps an Elman RNN's state: hₜ = tanh(W xₜ + U hₜ₋₁ + b) is rewritten at every token"}


def state_label(name: str) -> str:
    return LABELS.get(name, name)


def layer_label(i: int) -> str:
    return f"layer {i}"


def default_state(trace: GateTrace) -> str:
    """The state the view opens on: the cell state c where the cell has one (an LSTM), else the hidden state h."""
    return "c" if "c" in trace.names else "h"


def pair_texts(pair: str | None, a: str | None = None, b: str | None = None) -> tuple[str, str]:
    """The two sentences of the "Compare two sentences" section: a named pair's (None: the first), or `a` and `b`
    (your own pair, OWN_PAIR; None: the first pair's)."""
    if pair != OWN_PAIR:
        return PAIRS.get(pair or "", FIRST_PAIR)
    return FIRST_PAIR[0] if a is None else a, FIRST_PAIR[1] if b is None else b


def gates_origin(trace: GateTrace) -> Origin:
    """The badge of every chart drawn from the recomputed gates (a trace that read tokens)."""
    start = f"from {md(trace.tokens[0])} on" if trace.special[0] else \
        "from the first token on (no beginning-of-sentence token)"
    cell = trace.cell.upper()
    return Origin("recomputed", f"every gate and state from the weights with PyTorch's {cell} equations, {start}: the "
                                f"hidden states equal torch.nn.{cell}'s on this run to {trace.max_abs_error:.1e}.")


def opening(trace: GateTrace) -> Presentation:
    """What the page says before its controls: the trace's notes, as notes when it read no token (then nothing is
    drawn), else as warnings."""
    p = Presentation()
    p.say("warning" if len(trace) else "note", *trace.notes)
    return p


def shown_units(trace: GateTrace, name: str, layer: int, direction: int, sort: str, top: int,
                reference: GateTrace | None = None) -> np.ndarray:
    """The units the heatmap shows, in its order: the `top` units of state `name` by `sort`, ranked on `reference`
    (the trained model's run of the same sentence, for a training step) where given."""
    return unit_order((trace if reference is None else reference).gates[name][layer, direction], sort, top)


def heatmaps(trace: GateTrace, name: str, layer: int, direction: int, units: np.ndarray, sort: str, top: int,
             theme: Theme, model_id: str, reference: GateTrace | None = None, trained_id: str = "",
             other: GateTrace | None = None, other_id: str = "", other_error: str = "") -> Presentation:
    """The token × unit heatmap of state `name` at `units`; with `other` (a second model's run of the sentence) its
    heatmap on one colour scale and B − A where the two have the same shape of state (else on its own scale, and
    why); other_error: why the second model could not be read."""
    p = Presentation()
    if other_error:
        p.say("warning", f"{other_id} cannot be compared here: {other_error}")
    gates = gates_origin(trace)
    values = trace.gates[name][layer, direction]
    diff, why = (None, "") if other is None else model_difference(trace, other, name, layer, direction)
    scale: tuple[np.ndarray, ...] = () if reference is None else (reference.gates[name][layer, direction][:, units],)
    if diff is not None and other is not None:  # both models on one colour scale
        scale = (*scale, values[:, units], other.gates[name][layer, direction][:, units])
    p.figure("heatmap", viz.gate_heatmap(trace, name, layer, direction, units, theme, scale, named=other is not None),
             gates, f"{name}-layer{layer}")
    p.say("caption", f"{trace.num_layers} layer{'s' if trace.num_layers > 1 else ''}"
          + (", both directions" if trace.num_directions == 2 else "")
          + f" · {trace.hidden_size} units, {len(units)} shown, sorted by {sort} (change both under Units)"
          + ("" if reference is None else f"; at every training step the units are sorted, and the colours scaled, "
                                          f"as in the trained model ({trained_id}) on this sentence"))
    if other is None:
        return p
    if diff is None:
        p.say("note", f"{other_id} is drawn on its own scale and in its own order of units, with no difference: "
                      f"{why}.")
        if name in other.gates:
            own = min(layer, other.num_layers - 1)
            order = unit_order(other.gates[name][own, 0], sort, top)
            p.figure("heatmap_b", viz.gate_heatmap(other, name, own, 0, order, theme, named=True), gates,
                     f"{name}-compare")
        return p
    p.figure("heatmap_b", viz.gate_heatmap(other, name, layer, direction, units, theme, scale, named=True), gates,
             f"{name}-compare")
    p.figure("heatmap_diff", viz.model_diff_heatmap(diff, units, trace.tokens, name, model_id, other.model_id, theme),
             Origin("recomputed", f"the difference of the two recomputed runs on this sentence; their hidden states "
                                  f"equal torch.nn's to {trace.max_abs_error:.1e} and {other.max_abs_error:.1e}."),
             f"{name}-difference")
    p.say("caption", f"Both on one colour scale, units in the order of {model_id}'s heatmap; largest |B − A|: "
                     f"{viz.largest(diff[:, units]):.3f}.")
    return p


def inferred(trace: GateTrace) -> Presentation:
    """What the view read from the model (one line per row of the adapter's description, its value as code) and
    the check of the recomputed states against the framework's own module (under the badge READ)."""
    p = Presentation()
    p.say("line", *(f"{what}: `{' '.join(value.replace('`', '').split())}`" for what, value in trace.inferred))
    p.say("caption", f"Check: the recomputed hidden states equal torch.nn's own {trace.cell.upper()} on the same "
                     f"weights to {trace.max_abs_error:.1e} (max |difference|).")
    return p


def unit_colours(trace: GateTrace, name: str, layer: int, direction: int, unit: int, theme: Theme,
                 reference: GateTrace | None = None) -> Presentation:
    """The sentence coloured by unit `unit`'s state `name` in the heatmap's colours (HTML "unit_colours", every token
    escaped; its scale from `reference`, the trained model's run, where given) and its caption."""
    values = trace.gates[name][layer, direction, :, unit]
    lo, hi = viz.value_range(name, values if reference is None else reference.gates[name][layer, direction, :, unit])
    p = Presentation()
    p.html("unit_colours", viz.colored_tokens_html(trace.tokens, values, lo, hi, viz.state_colorscale(name, theme)))
    p.say("caption", f"The sentence coloured by the {LABELS[name]} of unit {unit} in the heatmap's colours "
                     f"({viz.scale_words(name, theme)}; scale {lo:.2f} … {hi:.2f}); hover a word for its value. Pick "
                     "the state above the heatmap.")
    return p


def unit_states(trace: GateTrace, layer: int, direction: int, unit: int, theme: Theme,
                reference: GateTrace | None = None, trained_id: str = "") -> Presentation:
    """Every state of unit `unit` through the sentence (its y axis held to the trained model's range for a training
    step: `reference`)."""
    p = Presentation()
    p.figure("unit_lines", viz.unit_lines(trace, layer, direction, unit, theme,
                                          None if reference is None else viz.unit_range((reference, trace), layer,
                                                                                        direction, unit)),
             gates_origin(trace), f"unit{unit}")
    if reference is not None:
        p.say("caption", f"The y axis holds this unit's states in the trained model ({trained_id}) and at this step: "
                         "it stays put while the step changes, unless a step goes beyond the trained model's range.")
    return p


def equations(trace: GateTrace, layer: int, direction: int, t: int, unit: int) -> Presentation:
    """The cell's equations with the numbers of token `t` and unit `unit`."""
    p = Presentation()
    p.say("caption", f"Unit {unit}, layer {layer}, token {t}. Under each brace: the unit's row of the weights times "
                     "the input (or the previous hidden state), plus its bias.")
    p.say("latex", viz.equations_latex(cell_terms(trace, layer, direction, t, unit)))
    return p


def saturated(trace: GateTrace, layer: int, direction: int, theme: Theme) -> Presentation:
    """Gate saturation per unit (Karpathy et al. 2015, Fig. 3), or why an Elman RNN has none."""
    p = Presentation()
    sat = saturation(trace, layer, direction)
    if not sat:
        p.say("note", "An Elman RNN has no gates: nothing saturates but its hidden state.")
        return p
    p.figure("saturation", viz.saturation_scatter(sat, theme), gates_origin(trace), "saturation")
    p.say("caption", "Each dot is a unit. Top-left: a gate almost always open; bottom-right: almost always closed; "
                     "near the diagonal: a gate that switches sharply (Karpathy et al. 2015, Fig. 3). "
                     "Type a longer text for meaningful fractions.")
    return p


def next_tokens(trace: GateTrace, loaded: Loaded) -> Presentation:
    """After each token, the five most probable next words (the model's own softmax), or why the model has none."""
    p = Presentation()
    if not trace.next_ids.shape[1]:
        p.say("note", not_a_language_model(loaded, "predicts no next word") or
              "This model has no output layer over its vocabulary (or reads in both directions): it does not predict "
              "next tokens.")
        return p
    rows = viz.next_token_rows(trace)
    p.table("next_tokens", {k: [row.get(k, "") for row in rows] for k in (rows[0] if rows else {})},
            Origin("model", "softmax of the model's own logits on this run."))
    p.say("caption", "After reading each token, the five most probable next words: softmax(W_out hₜ + b), the model's "
                     "own output on this run (an unknown-word token, any word outside the vocabulary, in a column of "
                     "its own)" + (f", which starts at {trace.tokens[0]} as the model was trained." if trace.special[0]
                                   else ", from the first token as typed."))
    return p


def two_sentences(a: GateTrace, b: GateTrace, name: str, layer: int, direction: int, top: int,
                  theme: Theme) -> Presentation:
    """State `name` of sentence B minus sentence A, position by position, at the `top` units that differ most."""
    p = Presentation()
    if not (len(a) and len(b)):
        p.say("note", "Type two sentences to compare.")
        return p
    cmp = compare(a, b, name, layer, direction)
    p.say("note", *cmp.notes)
    p.figure("compare_sentences", viz.diff_heatmap(cmp, cmp.order[:top], theme),
             Origin("recomputed", f"the difference of two recomputed runs; their hidden states equal torch.nn's to "
                                  f"{a.max_abs_error:.1e} and {b.max_abs_error:.1e}."), "difference")
    p.say("caption", f"Units whose {LABELS[name]} differs most from the first different token on: "
                     + ", ".join(f"{u} ({cmp.score[u]:.3f})" for u in cmp.order[:5]))
    return p


def notices(trace: GateTrace, a: GateTrace, b: GateTrace, layer: int, direction: int) -> list[str]:
    """What to notice for this cell (an LSTM, a GRU and an Elman RNN keep a state differently), computed on the
    first pair of sentences (`a`, `b`: FIRST_PAIR read by the model) and on the sentence shown."""
    return [*_points(gate_notice(trace, a, b, layer, direction), trace, FIRST_PAIR), UNKNOWN]


def _points(notice: GateNotice, trace: GateTrace, pair: tuple[str, str]) -> list[str]:
    """What to notice for this cell (an LSTM, a GRU and an Elman RNN keep a state differently), from
    lstm_gates.gate_notice on the view's first pair of sentences (`pair`) and the sentence shown (`trace`)."""
    carried = "."
    if notice.carried:
        carried = (f": in “{pair[0]}” / “{pair[1]}” (Compare two sentences) unit {notice.unit}'s "
                   f"{LABELS[notice.state]} differs by {notice.diff_start:+.2f} at “{notice.start_token}” and by "
                   f"{notice.diff_end:+.2f} at “{notice.end_token}”, {notice.end - notice.start} tokens later"
                   + (f", its {LABELS[notice.keep]} averaging {notice.keep_mean:.2f} in between: a unit that holds "
                      "its difference like this can carry the subject's number to the verb."
                      if notice.keep_mean is not None else "."))
    points = [KEEPS[notice.keep] + carried]
    if notice.saturated is not None:
        points.append(f"Sort by saturation: on this sentence {notice.saturated:.0%} of the {LABELS[notice.keep]}'s "
                      f"values are below 0.1 or above 0.9, and {notice.steady_units} of the {notice.units} units "
                      "stay so on at least 90 % of the tokens; look for units that switch sharply at brackets or "
                      "quotes (Karpathy et al. 2015).")
    if notice.max_c is not None:
        points.append(f"The cell state c is unbounded, h = o ⊙ tanh(c) is not: on this sentence |c| reaches "
                      f"{notice.max_c:.2f} and |h| {notice.max_h:.4f}; look at both for the same unit.")
    else:
        points.append(("A GRU" if trace.cell == "gru" else "An Elman RNN") + " has no cell state: h is its whole "
                      "memory" + (f", within ±1 (a tanh; here |h| reaches {notice.max_h:.4f})."
                                  if trace.cell == "gru" or trace.nonlinearity == "tanh" else
                                  f" (here |h| reaches {notice.max_h:.4f})."))
    return points


def present(trace: GateTrace, name: str, layer: int, direction: int, sort: str, top: int, section: str,
            theme: Theme, model_id: str, loaded: Loaded, *, unit: int | None = None, t: int = 0,
            reference: GateTrace | None = None, trained_id: str = "", other: GateTrace | None = None,
            other_id: str = "", other_error: str = "",
            pair: tuple[GateTrace, GateTrace] | None = None) -> Presentation:
    """The view as one answer (the notebook's): the opening notes, the heatmaps, what was read from the model and
    the section `section` (one of SECTIONS): unit `unit` (None: the heatmap's first) at token `t`, or the sentences
    `pair` compared. `loaded`: the model, for what it says when it predicts no next word."""
    p = opening(trace)
    if not len(trace):
        return p
    units = shown_units(trace, name, layer, direction, sort, top, reference)
    parts = [heatmaps(trace, name, layer, direction, units, sort, top, theme, model_id, reference, trained_id, other,
                      other_id, other_error), inferred(trace)]
    if section == SECTIONS[0]:
        unit = int(units[0]) if unit is None else unit
        parts += [unit_colours(trace, name, layer, direction, unit, theme, reference),
                  unit_states(trace, layer, direction, unit, theme, reference, trained_id),
                  equations(trace, layer, direction, t, unit)]
    elif section == SECTIONS[1]:
        parts.append(saturated(trace, layer, direction, theme))
    elif section == SECTIONS[2]:
        parts.append(next_tokens(trace, loaded))
    elif pair is not None:
        parts.append(two_sentences(*pair, name, layer, direction, top, theme))
    for part in parts:
        p.add(part)
    return p
