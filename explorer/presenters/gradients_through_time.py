"""Gradients through time's presenter: GradientTraces, one per model (input_grad, distance, products: (T,);
step_norms: (T − 1,)) -> the gradient reaching each earlier word against its distance and the recurrent Jacobians'
norms, one line per model; what each model predicts; the models left out and why."""
from __future__ import annotations

from collections.abc import Sequence

from explorer.files.safe_load import ModelLoadError
from explorer.loading import pretrained
from explorer.loading.catalogue import FAMILIES, CatalogueEntry, ModelId
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.gradients_through_time import GradientTrace, left_out_notes
from explorer.viz import gradients_through_time as viz
from explorer.viz.theme import Theme

HELP = "The last word is the one predicted; the gradient of its log-probability flows back to every word before it."
NONE = "Choose recurrent language models and type a sentence of two words or more."
NOTICES = [
    "A Jacobian norm below 1 at every step makes the product shrink geometrically: the vanishing gradient. Above 1 "
    "the bound grows, yet the gradient that actually reaches a word can still be small (it is a product of matrices, "
    "not of their norms).",
    "Compare the three cells on a long agreement sentence: how much of log p(verb) reaches the subject?",
]
OWN = Origin("model", "autograd through each model's own recurrence and output layer on this sentence.")
JACOBIANS = Origin("model", "Jacobians of each model's own state update along this sentence (torch.func), largest "
                            "singular values.")


def model_label(model_id: str) -> str:
    return model_id.removeprefix("builtin:")


def _is_model_id(text: str) -> bool:
    try:
        ModelId.parse(text)
    except ModelLoadError:
        return False
    return True


def left_out(left: Sequence[str], entries: Sequence[CatalogueEntry], kept: list[str]) -> Presentation:
    """What the page says of the ?models= values it cannot show (`left`): each model id by name and kind (the kind
    from the packaged models and the catalogue `entries`), and how many values are not model ids (those are not
    repeated); kept: the asked models that are shown."""
    families = {**{m.id: m.family for m in pretrained.PACKAGED.values()}, **{e.id: e.family for e in entries}}
    kinds = {m: FAMILIES[f] for m, f in families.items() if f in FAMILIES}
    named = [m for m in left if _is_model_id(m)]  # a URL value is shown only when it is a well-formed model id
    p = Presentation()
    p.say("warning", *left_out_notes(named, kinds, kept))
    if len(named) < len(left):
        p.say("warning", f"{len(left) - len(named)} value(s) of ?models= are not model ids: left out.")
    return p


def present(traces: Sequence[GradientTrace], theme: Theme, failed: Sequence[tuple[str, str]] = ()) -> Presentation:
    """The view for the models that could be read (`traces`, in the order chosen); failed: (model id, why) of each
    model left out (no recurrence, no output layer, too short a sentence)."""
    p = Presentation()
    p.say("note", *(f"{model_id}: {why}" for model_id, why in failed))
    if not traces:
        p.say("note", NONE)
        return p
    notes: dict[str, list[str]] = {}
    for t in traces:
        for note in t.notes:
            notes.setdefault(note, []).append(t.model_id)
    p.say("note", *(note if len(ids) == len(traces) else f"{', '.join(ids)}: {note}" for note, ids in notes.items()))
    first = traces[0]
    p.say("line", f"Predicting {first.target}: " + "; ".join(f"{t.cell} p = {t.prob:.3g}" for t in traces))
    p.figure("gradients", viz.gradient_lines(traces, theme), OWN, "gradients-through-time")
    p.say("caption", f"After “{' '.join(first.tokens)}”, as {first.model_id} reads it · "
          + " · ".join(f"{t.cell}: the farthest word gets {t.decay:.3g}× the gradient of the nearest" for t in traces))
    p.figure("jacobians", viz.jacobian_lines(traces, theme), JACOBIANS, "jacobian-norms")
    return p
