"""Per-position results of a left-to-right model, kept under the token prefix they read.

A causal decoder's or a one-way recurrent LM's output at position p reads only the tokens 0 … p. So a result for
position p (a row of integrated gradients, the Jacobian of one recurrent step, a column of the logit lens) depends
only on that prefix and on the probe's settings, and stays valid when the user types on at the end of the sentence.
The probes store such results here and recompute only the positions whose prefix changed: typing the next word of a
20-token sentence costs one row, not twenty.

The memo's results are entries of the model's state (explorer.runtime.model_state: counted in bytes against one
budget, gone when the model is), shared by every session using that model. Keys hold the prefix's token ids
themselves (no hash that could collide).
"""
from __future__ import annotations

import weakref
from typing import Generic, Hashable, TypeVar, cast

from explorer.runtime import model_state

V = TypeVar("V")


class PrefixMemo(Generic[V]):
    """The results one probe keeps for one model (its `owner`: the adapter or the capability object the probe reads),
    as a lookup/store map key -> result over explorer.runtime.model_state; `hits` / `misses` count lookups (the tests
    read them)."""

    def __init__(self, owner: object, probe: str) -> None:
        self._owner = weakref.ref(owner)  # not the owner itself: the memo is an entry of the owner's state
        self.name = f"memo:{probe}"
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        owner = self._owner()
        value = model_state.peek(owner, self.name, key) if owner is not None else None
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return cast("V | None", value)

    def put(self, key: Hashable, value: V) -> None:
        owner = self._owner()
        if owner is not None:
            model_state.kept(owner, self.name, key, lambda: value)

    def __len__(self) -> int:
        owner = self._owner()
        return model_state.count(owner, self.name) if owner is not None else 0


def prefix_memo(owner: object, probe: str) -> PrefixMemo[V]:
    """The memo of `probe` ("attribution", "gradients", "lens:<k>") on this model's adapter (or the capability object
    the probe reads), made on first use. One probe keeps one kind of result: the caller names it
    (`memo: PrefixMemo[np.ndarray] = prefix_memo(...)`)."""
    return model_state.kept(owner, "memos", probe, lambda: PrefixMemo[V](owner, probe))
