"""Watch it learn's presenter: SeriesCurves (steps (S,); curves: name -> (S,); heads: score -> (S, L, H)) -> the
measured curves of each snapshot (clicking a point opens a view at that step), each head's score over training, every
snapshot's numbers, and what to notice."""
from __future__ import annotations

from collections.abc import Mapping

from explorer.presenters.presentation import Origin, Presentation
from explorer.training import curves as TC
from explorer.text.escape import md
from explorer.viz import training_curves as V
from explorer.viz.theme import Theme


def not_trained(model_id: str, with_series: list[str]) -> str:
    """Why a model has no curves, naming those that have."""
    return (f"{model_id} was not trained with snapshots. The models that were: {', '.join(with_series) or 'none here'} "
            "(train one with `python -m explorer.training.train NAME --snapshots 16`).")


def recorded(first: TC.SeriesCurves, model_id: str, theme: Theme) -> Presentation:
    """The losses the training run recorded at each snapshot: drawn at once while the held-out measures are taken."""
    p = Presentation()
    p.figure("curves_so_far_0", V.curves_figure(first.steps, first.curves, model_id, theme),
             Origin("model", "the held-out and training losses the training run recorded at each snapshot; the "
                             "held-out measures follow."), "explorer")
    return p


def measured(curves: TC.SeriesCurves) -> Origin:
    """What the measured curves, the heads' scores and the table are."""
    if curves.sentence:
        return Origin("model", f"each snapshot's stored weights run on “{md(curves.sentence)}”; the held-out loss and "
                               "accuracy as the training run measured them on its held-out examples.")
    return Origin("model", f"each snapshot's stored weights measured on held-out data ({curves.n_items} agreement "
                           f"items, {TC.SENTENCES} sentences, {TC.REPEATS} repeated sequences); the losses as the "
                           "training run recorded them.")


def present(curves: TC.SeriesCurves, model_id: str, theme: Theme) -> Presentation:
    """The notes, every curve against the step (each point's customdata [step, curve]) and each curve's last value
    and first step at 0.9."""
    p = Presentation()
    p.say("note", *curves.notes)
    p.figure("curves", V.curves_figure(curves.steps, curves.curves, model_id, theme), measured(curves),
             "training-curves")
    final = {name: float(v[-1]) for name, v in curves.curves.items()}
    first_good = {name: next((int(s) for s, x in zip(curves.steps, v) if x >= 0.9), None)
                  for name, v in curves.curves.items() if name not in V.LOSSES}
    p.say("caption", " · ".join(f"{name}: {final[name]:.3f} at the end" + (
        f", first ≥ 0.9 at step {first_good[name]:,}" if first_good.get(name) is not None else "")
        for name in curves.curves))
    return p


def heads(curves: TC.SeriesCurves, score: str, theme: Theme) -> Presentation:
    """Each head's `score` ("previous-token" or "induction") at each snapshot (customdata [step, layer, head]), and
    the best head at the end (nothing for a model without attention heads)."""
    p = Presentation()
    if not curves.heads:
        return p
    p.figure("heads", V.heads_figure(curves.steps, curves.heads[score], f"Each head's {score} score over training",
                                     theme), measured(curves), f"{score}-scores")
    best = curves.heads[score][-1]
    layer, h = divmod(int(best.argmax()), best.shape[1])
    p.say("caption", f"At the end, the highest {score} score is head L{layer}H{h}'s, {float(best.max()):.3f} "
                     f"(at the first snapshot: {float(curves.heads[score][0].max()):.3f}).")
    return p


def snapshots(curves: TC.SeriesCurves) -> Presentation:
    """Every snapshot's numbers (step, epoch, each curve, the number unit)."""
    rows = V.table_rows(curves.steps, curves.epochs, curves.curves, curves.unit)
    keys = dict.fromkeys(k for row in rows for k in row)
    p = Presentation()
    p.table("snapshots", {k: [row.get(k) for row in rows] for k in keys}, measured(curves))
    return p


def clicked(state: object) -> tuple[int | float | str, ...] | None:
    """The customdata of the point clicked on a chart ([step, curve] or [step, layer, head]) from the chart's
    selection state (a mapping with "selection": {"points": [...]}), or None."""
    selection = state.get("selection") if isinstance(state, Mapping) else None
    return V.selected(selection.get("points") or []) if isinstance(selection, Mapping) else None


def notices(curves: TC.SeriesCurves) -> list[str]:
    return [
        "When does held-out accuracy rise, compared with when the loss falls? And the decision on the sentence: is it "
        "settled long before the end, or does it flip late? Click a point to open the Decision view at that step.",
    ] if curves.sentence else [
        "When does agreement leave chance (0.5), compared with when the loss falls? The caption under the chart gives "
        "the first step at which each share reaches 0.9.",
        "A recurrent model's number unit: is it the same unit from one snapshot to the next once it is accurate (the "
        "table below names it)? Click a point to see that unit at that step.",
        "Neighbour precision: from which step do words of a class get similar embeddings?",
    ]
