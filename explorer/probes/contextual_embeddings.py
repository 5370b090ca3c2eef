"""Contextual embeddings: a sentence through the model, one vector per token at every layer, the same word in two
sentences layer by layer (cosine similarity), and a PCA of the token vectors across layers.

`ContextTrace.states`, (L+1, T, C), numbered as the app numbers layers (from 0): states[0] the embeddings, what
enters layer 0; states[l + 1] the output of layer l: Hugging Face `output_hidden_states` (encoder-decoders: the
encoder's; the last as the model returns it, after its final norm where it has one), built-in RNN LMs and seq2seq
encoders the output of each recurrent layer, tiny GPT the output of each block. Cosine: cos(u, v) = u·v / (|u| |v|).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.adapters.protocols import KnowsPositions, Loaded
from explorer.runtime import budget
from explorer.adapters.base import Unsupported
from explorer.adapters.examples import left_to_right, unknown_words
from explorer.files.vector_text import EmbeddingError
from explorer.probes.word_embeddings import _pieces, _short


class ContextError(EmbeddingError):
    """The model has no contextual layers (or the text gives no tokens); str() is for the user."""


@dataclass(frozen=True)
class ContextTrace:
    """A sentence through the model, numbered as the app numbers layers (from 0: layer l is block l, or recurrent
    layer l). states: L+1 arrays (T, C_k) float32: states[0] the embeddings (what enters layer 0), states[l + 1]
    the output of layer l (C_0 may differ from the layers' width, e.g. an RNN's embedding size); layer_names
    (L+1,): "embeddings", "after layer 0", …, "after layer L−1" (+ "final norm" where the model returns its last
    state after one); tokens, special, ids: (T,).
    left_to_right: a token's vector reads only the tokens before it (a causal transformer, a one-way RNN);
    positions: how the model knows order (Adapter.position_scheme().kind: learned, sinusoidal, rotary, alibi,
    relative, none; "recurrent" for recurrent layers)."""

    model_id: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    layer_names: tuple[str, ...]
    states: tuple[np.ndarray, ...]
    what: str
    notes: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()
    left_to_right: bool = False
    positions: str = ""

    def __len__(self) -> int:
        return len(self.tokens)


LAYER_NAMES = ("embed", "blocks.*.resid_pre", "blocks.*.resid_post", "ln_final", "rnn.*.out", "encoder.embed",
               "encoder.rnn.*.out", "encoder.blocks.*.resid_pre", "encoder.blocks.*.resid_post", "encoder.ln_final",
               "rnn.0.bwd.h", "encoder.rnn.0.bwd.h")  # a backward direction: the recurrence reads both ways
# The "same word in two sentences" pair per kind of model (Sentence A, Sentence B, the word). A model that reads
# left to right sees only the words before 'bank', so there they come first; an encoder reads the whole sentence.
PAIR_LEFT_TO_RIGHT = ("He sat down on the grassy river bank", "She paid the cheque into her bank", "bank")
PAIR_BOTH_WAYS = ("the bank of the river", "my bank account", "bank")
# The same for a model that cannot read those words (a built-in's generated English, explorer.data.english): one
# word after different words (left to right), or before them (both ways)
PAIRS_GENERATED = {True: ("the farmers feed the dog", "the old woman saw the dog", "dog"),
                   False: ("the dog sleeps in the garden", "the dog chased the cat", "dog")}


def reads_left_to_right(adapter: object) -> bool:
    """Whether the model's hidden state at a token reads only the tokens before it (known before a run): a causal
    transformer, or a recurrent language model (one direction: it predicts the next word); the example sentences
    follow the same rule."""
    return left_to_right(adapter)


def has_context(loaded: Loaded) -> bool:
    """Whether the model computes each token's vector in its sentence (a transformer or a recurrent network: it can
    do more than give its embedding tables), rather than having one vector per word (word2vec, GloVe, a bare
    embedding table)."""
    return bool(loaded.caps.names - {"tables"})


def drift_pair(loaded: Loaded) -> tuple[str, str, str]:
    """The default (sentence A, sentence B, word) of the same-word comparison for this model (see PAIR_*): the
    generated-English pair when the model reads a word of the natural one as unknown."""
    one_way = reads_left_to_right(loaded.adapter)
    pair = PAIR_LEFT_TO_RIGHT if one_way else PAIR_BOTH_WAYS
    if any((unknown_words(loaded.adapter, s) or 0) > 0 for s in pair[:2]) and \
            all(unknown_words(loaded.adapter, s) == 0 for s in PAIRS_GENERATED[one_way][:2]):
        return PAIRS_GENERATED[one_way]
    return pair


def _position_kind(positions: KnowsPositions | None) -> str:
    if positions is None:
        return ""
    try:
        return str(positions.position_scheme().kind)
    except Exception:  # a model whose position scheme cannot be read: said as unknown, never guessed
        return ""


def contextual(loaded: Loaded, text: str) -> ContextTrace:
    """Hidden states of every layer for `text`, read from the model's record: see the module docstring. A text
    longer than the per-request budget prices (explorer.runtime.budget) is cut, with a note. Raises ContextError."""
    adapter = loaded.adapter
    mid = str(getattr(loaded, "id", "model"))
    enc = adapter.encode(text, max_tokens=budget.cap_tokens(loaded.model, adapter.max_tokens))
    if not len(enc):
        raise ContextError(" ".join(enc.notes) or "Type a sentence.")
    try:
        rec = adapter.run(enc, names=LAYER_NAMES)
    except Unsupported as exc:
        raise ContextError(str(exc)) from None
    p = "encoder." if adapter.is_encoder_decoder else ""
    whose = "the encoder's " if p else ""
    if rec.layers(p + "blocks.{l}.resid_pre"):
        L = len(rec.layers(p + "blocks.{l}.resid_pre"))
        last = f"{p}blocks.{L - 1}.resid_post" if f"{p}blocks.{L - 1}.resid_post" in rec else p + "ln_final"
        normed = last.endswith("ln_final")
        keys = [f"{p}blocks.{layer}.resid_pre" for layer in range(L)] + [last]
        names = ["embeddings"] + [f"after layer {layer}" for layer in range(L)]
        if normed:
            names[-1] += " + final norm"
        what = (f"{whose}hidden states: the embeddings (the residual stream entering layer 0), then the output of "
                f"each layer 0 … {L - 1} (block l's residual stream)"
                + ("; the last as the model returns it, after its final norm" if normed else ""))
        left_to_right, positions = bool(adapter.causal) and not p, _position_kind(loaded.caps.positions)
    elif rec.layers(p + "rnn.{l}.out"):
        layers = rec.layers(p + "rnn.{l}.out")
        keys = [p + "embed"] + [f"{p}rnn.{layer}.out" for layer in layers]
        names = ["embeddings"] + [f"after {'encoder ' if p else ''}layer {layer}" for layer in layers]
        what = (f"{whose}input embeddings (what enters recurrent layer 0), then the output h_t of each recurrent "
                f"layer 0 … {len(layers) - 1}")
        left_to_right, positions = f"{p}rnn.0.bwd.h" not in rec, "recurrent"
    else:
        raise ContextError(f"{mid} has one vector per word and no layers: there are no contextual embeddings. "
                           "Pick a language model or a transformer.")
    states = tuple(np.ascontiguousarray(rec[k], dtype=np.float32) for k in keys)
    return ContextTrace(model_id=mid, tokens=enc.tokens, special=enc.special or (False,) * len(enc),
                        layer_names=tuple(names), states=states, what=what, notes=enc.notes,
                        ids=tuple(int(i) for i in enc.ids), left_to_right=left_to_right, positions=positions)


def find_span(tokens: Sequence[str], word: str) -> tuple[int, int] | None:
    """[start, end) of the first run of tokens that spells `word` (a leading space mark ·, Ġ, ▁ and WordPiece's ##
    ignored, any case)."""
    target = word.strip().lower()
    if not target:
        return None
    clean = [re.sub(r"^(##|Ġ|▁|·)", "", t).lower() for t in tokens]
    for i in range(len(clean)):
        acc = ""
        for j in range(i, len(clean)):
            acc += clean[j]
            if acc == target:
                return i, j + 1
            if not target.startswith(acc):
                break
    return None


@dataclass(frozen=True)
class Drift:
    """cos: (L+1,) cosine similarity per state (layer_names) between the word's vectors in sentence A and sentence
    B (mean over its pieces); spans: its token run in each sentence."""

    word: str
    layer_names: tuple[str, ...]
    cos: np.ndarray
    span_a: tuple[int, int]
    span_b: tuple[int, int]


def drift(a: ContextTrace, b: ContextTrace, word: str) -> Drift:
    """The same word in two sentences, layer by layer. Raises ContextError when a sentence lacks the word."""
    spans = []
    for label, trace in (("A", a), ("B", b)):
        span = find_span(trace.tokens, word)
        if span is None:
            raise ContextError(f"'{word}' is not among the tokens of sentence {label} "
                               f"({' '.join(trace.tokens)[:200]}).")
        spans.append(span)
    cos = np.zeros(len(a.states), dtype=np.float64)
    for layer, (sa, sb) in enumerate(zip(a.states, b.states)):
        va = sa[spans[0][0]:spans[0][1]].mean(axis=0).astype(np.float64)
        vb = sb[spans[1][0]:spans[1][1]].mean(axis=0).astype(np.float64)
        norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
        cos[layer] = float(va @ vb) / norm if norm > 0 else 0.0
    return Drift(word, a.layer_names, cos.astype(np.float32), spans[0], spans[1])


_NO_POSITION_VECTOR = {
    "rotary": "its positions are rotations of q and k inside attention, RoPE",
    "alibi": "its positions are a bias on the attention scores, ALiBi",
    "relative": "its positions are a learned bias on the attention scores",
    "recurrent": "a recurrent model knows order from its recurrence",
    "none": "no position vector was found in it",
}


def drift_story(a: ContextTrace, b: ContextTrace, d: Drift) -> tuple[str, ...]:
    """What this comparison shows for this model, in sentences that print the computed values: the embeddings (the
    same token? a position vector?), what each vector can read (left to right: the tokens before it; else the
    whole sentence), and the cosines at the embeddings, at their lowest and after the last layer."""
    w = f"‘{_short(d.word)}’"
    (a0, a1), (b0, b1) = d.span_a, d.span_b
    same_token = (a.ids[a0:a1] == b.ids[b0:b1]) if a.ids and b.ids else a.tokens[a0:a1] == b.tokens[b0:b1]
    c0, low, k = float(d.cos[0]), float(d.cos.min()), int(np.argmin(d.cos))

    def where(span: tuple[int, int], label: str) -> str:
        n = span[1] - span[0]
        return f"token {span[0]} of {label}" if n == 1 else \
            f"tokens {span[0]}–{span[1] - 1} of {label} (the mean of its {n} pieces)"

    out = [f"{w} is {where(d.span_a, 'A')} and {where(d.span_b, 'B')}."]
    if not same_token:
        out.append(f"{w} is read as different tokens, {_pieces(a.tokens[a0:a1])} in A and {_pieces(b.tokens[b0:b1])} "
                   f"in B, so its vectors differ from the embeddings on (cos {c0:.3f}).")
    elif a.positions in ("learned", "sinusoidal"):
        if a0 == b0:
            out.append(f"At the embeddings {w} is token {a0} in both sentences: the same token plus the same "
                       f"{a.positions} position vector, so the same vector (cos {c0:.3f}).")
        else:
            out.append(f"At the embeddings the two vectors differ only by their {a.positions} position vectors "
                       f"(token {a0} in A, token {b0} in B): cos {c0:.3f}.")
    else:
        why = _NO_POSITION_VECTOR.get(a.positions, "its position scheme could not be read")
        out.append(f"The model adds no position vector to its input ({why}): at the embeddings {w} has the same "
                   f"vector in both sentences (cos {c0:.3f}).")
    if a.left_to_right:
        who = "A recurrent model that reads left to right" if a.positions == "recurrent" else "A causal model"
        before_a, before_b = a.ids[:a0] if a.ids else a.tokens[:a0], b.ids[:b0] if b.ids else b.tokens[:b0]
        if same_token and before_a == before_b:
            out.append(f"{who} reads only the tokens before a token, and the tokens before {w} are the same in A and "
                       f"B: its vectors agree at every layer (cos {low:.3f} at the lowest). The words after it cannot "
                       f"change them: put the words that decide its meaning before it.")
        else:
            shown_a, shown_b = _before(a, a0), _before(b, b0)
            out.append(f"{who} reads only the tokens before a token: {w} reads {shown_a} in A and {shown_b} in B; "
                       f"the words after it cannot change its vector.")
    else:
        out.append(f"The model reads the whole sentence in both directions: the vector of {w} can depend on every "
                   "token of its sentence.")
    last, names = float(d.cos[-1]), d.layer_names
    if k == len(d.cos) - 1:
        out.append(f"cos {c0:.3f} at the embeddings, {last:.3f} {names[-1]} (its lowest).")
    elif k == 0:
        out.append(f"cos {c0:.3f} at the embeddings (its lowest), {last:.3f} {names[-1]}.")
    else:
        out.append(f"cos {c0:.3f} at the embeddings, {low:.3f} at its lowest ({names[k]}), {last:.3f} {names[-1]}.")
    return tuple(out)


def _before(trace: ContextTrace, start: int, n: int = 16) -> str:
    """The tokens before position `start` (special ones left out), quoted: “He ·sat ·down”, or "nothing"."""
    shown = [_short(t, 20) for t, s in zip(trace.tokens[:start], trace.special) if not s]
    if not shown:
        return "nothing"
    return "“" + " ".join(shown[-n:]) + "”" if len(shown) <= n else "“… " + " ".join(shown[-n:]) + "”"


@dataclass(frozen=True)
class ContextProjection:
    """coords: (L+1, T, dims) PCA positions of every token at every layer (NaN where a layer cannot be placed in
    the fitted space); fitted: what the PCA was fitted on, in words."""

    coords: np.ndarray
    fitted: str
    explained: tuple[float, ...]


def context_projection(trace: ContextTrace, layer: int | None = None, dims: int = 2,
                       skip_special: bool = True) -> ContextProjection:
    """PCA of the sentence's token vectors, fitted on all layers together (layer None: the paths through the
    layers share one space; only layers of the common width) or on one layer's vectors (the others are placed with
    the same map when they have its width). Special tokens are left out of the fit when asked."""
    from explorer.projections.reduce import ProjectionError, fit

    T = len(trace.tokens)
    keep = np.array([not (s and skip_special) for s in trace.special], dtype=bool)
    if not keep.any():
        keep[:] = True
    width = trace.states[-1 if layer is None else layer].shape[1]
    same = [i for i, st in enumerate(trace.states) if st.shape[1] == width]
    fit_layers = same if layer is None else [layer]
    X = np.concatenate([trace.states[i][keep] for i in fit_layers])
    try:
        proj = fit(X, "pca", dims)
    except ProjectionError as exc:
        raise ContextError(f"No PCA of this sentence's vectors: {exc}") from None
    coords = np.full((len(trace.states), T, dims), np.nan, dtype=np.float32)
    assert proj.model is not None  # a PCA keeps its fitted map
    for i in same:
        coords[i] = proj.model.transform(trace.states[i])
    what = "all layers' token vectors together" if layer is None else f"the token vectors of {trace.layer_names[layer]}"
    if layer is None and len(same) < len(trace.states):
        what += f" (not {', '.join(trace.layer_names[i] for i in range(len(trace.states)) if i not in same)}: " \
                "another width)"
    return ContextProjection(coords, f"PCA fitted on {what}: {X.shape[0]} vectors × {width} dimensions"
                             + ("; special tokens left out" if skip_special and not keep.all() else ""),
                             proj.explained)


__all__ = [
    "ContextError", "ContextTrace", "contextual", "reads_left_to_right", "drift_pair", "find_span", "Drift", "drift",
    "drift_story", "ContextProjection", "context_projection",
]
