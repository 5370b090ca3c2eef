"""What a model can do, said once: each capability is the adapter typed as one protocol of
explorer.adapters.protocols, or None when the model cannot do it.

Capabilities are attached when a model is loaded (explorer.loading.loaders.LoadedModel.caps, a
protocols.Capabilities: `loaded.caps.lens`, `loaded.caps.stepper`, ...), so a probe asks
`if (lens := loaded.caps.lens) is None: raise ...` and mypy narrows the rest;
a view declares the capabilities it needs (explorer.views.View.needs), and the model pickers offer the models that
may have them. Before a model is loaded only its family is known (explorer.loading.catalogue.FAMILIES): MAY_HAVE
says what each family's models may have, and tests/test_capabilities.py checks it against every shipped model
once loaded (equal for them, but for a packaged model that says it has less: explorer.loading.pretrained.Packaged.caps)
and the tiny Hugging Face models of each family (a subset: a checkpoint without an output layer, say, has less).

The capabilities are the rows of CAPABILITIES below (name, protocol, what the model can do); docs/ARCHITECTURE.md
prints them with the views that need each, a table tests/test_capabilities.py keeps true.

Adding a capability: a protocol and a field of `Capabilities` in protocols.py; below, a `Capability` row, the line
of `of` that says whether an adapter has it, and the families that may have it in MAY_HAVE (docs/ARCHITECTURE.md,
"Adding a view", walks through one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from explorer.adapters.base import Adapter
from explorer.adapters.decision import Decider
from explorer.adapters.protocols import (Capabilities, Reads, aligns, can_intervene, decides, differentiates,
                                         generates, has_attention, has_tables, is_composed, is_recurrent,
                                         knows_positions, unembeds)


@dataclass(frozen=True)
class Capability:
    """One thing a model may be able to do: `name` is its attribute on a loaded model, `protocol` the interface a
    probe then calls, `what` one line for the docs and the pickers."""

    name: str
    protocol: str
    what: str


CAPABILITIES: tuple[Capability, ...] = (
    Capability("stepper", "Generates", "generates token by token"),
    Capability("lens", "Unembeds", "predicts the next token, each layer readable through its output layer"),
    Capability("gradient", "Differentiates", "gives its logits as a function of its input embeddings"),
    Capability("attention", "HasAttention", "records per-head attention"),
    Capability("positions", "KnowsPositions", "is a transformer, read for how it knows word order"),
    Capability("fill_in", "Records", "reads a sentence both ways (an encoder)"),
    Capability("alignment", "Aligns", "attends from its output to its source"),
    Capability("recurrence", "Recurrent", "runs a recurrent cell whose weights were read"),
    Capability("patching", "Intervenes", "runs with activations patched at named sites"),
    Capability("tables", "HasTables", "has embedding tables"),
    Capability("decision", "Decides", "decides a label for a sentence or for each word (a classifier or tagger)"),
)
NAMES: tuple[str, ...] = tuple(c.name for c in CAPABILITIES)
WHAT: dict[str, str] = {c.name: c.what for c in CAPABILITIES}

# What the models of each family (explorer.loading.catalogue.FAMILIES) may have, before one is loaded: what the
# pickers offer. A loaded model has these or fewer (tests/test_capabilities.py).
_LM = ("stepper", "lens", "gradient", "patching", "tables")
MAY_HAVE: dict[str, frozenset[str]] = {
    "rnn-lm": frozenset((*_LM, "recurrence")),
    "rnn-classifier": frozenset(("recurrence", "tables", "decision", "patching")),
    # a user's state dict: a recurrent network is inferred from it, with a language-model or a task head
    "state-dict": frozenset((*_LM, "recurrence", "decision")),
    "decoder": frozenset((*_LM, "attention", "positions")),
    # with a task head, an encoder decides (MiniLM fine-tuned: pretrained:minilm-sentiment, the Models page's runs)
    "encoder": frozenset(("attention", "positions", "fill_in", "tables", "decision")),
    "masked-lm": frozenset(("attention", "positions", "fill_in", "tables")),
    "encoder-decoder": frozenset(("stepper", "gradient", "attention", "positions", "alignment", "tables")),
    "seq2seq-rnn": frozenset(("stepper", "gradient", "alignment", "tables")),
    "word2vec": frozenset(("tables",)),
}


def may_have(family: str, needs: Iterable[str] | None) -> bool:
    """Whether a model of `family` may have every capability in `needs` (None: a view that reads any model; an
    unknown family, known only once loaded, may have anything: the view says what is missing)."""
    if needs is None or family not in MAY_HAVE:
        return True
    return set(needs) <= MAY_HAVE[family]


def families_with(needs: Iterable[str] | None) -> list[str]:
    """The families whose models may have every capability in `needs`."""
    return [family for family in MAY_HAVE if may_have(family, needs)]


def of(a: Adapter) -> Capabilities:
    """The capabilities of adapter `a`, read from its flags and from what it implements (never raises). Where `a` is
    composed of parts (Hugging Face: explorer.adapters.hf_parts), each capability is read from its part of that
    name (the adapter itself where it has none)."""
    def part(name: str) -> Reads:
        return a.part(name) if is_composed(a) else a

    one_way = a.can_generate and not a.is_encoder_decoder
    transformer = has_attention(part("attention"))
    return Capabilities(
        stepper=s if generates(s := part("stepper")) else None,
        lens=le if one_way and unembeds(le := part("lens")) else None,
        gradient=g if differentiates(g := part("gradient")) else None,
        attention=at if has_attention(at := part("attention")) else None,
        positions=po if transformer and knows_positions(po := part("positions")) else None,
        fill_in=a if transformer and not a.causal and not a.is_encoder_decoder else None,
        alignment=al if aligns(al := part("alignment")) else None,
        recurrence=r if is_recurrent(r := part("recurrence")) else None,
        patching=pa if can_intervene(pa := part("patching")) else None,
        tables=t if has_tables(t := part("tables")) else None,
        decision=d if a.task_head is not None and decides(d := Decider(a, a.task_head, *a.decision_fns)) else None,
    )
