"""Seq2seq alignment: model + source (+ optional target) -> AlignmentTrace of numpy arrays.

One function for every encoder-decoder, `alignment_trace(loaded, text, target, decoding, beam)`:
  1. the output: the user's target (teacher forcing), or greedy / beam search through the one generation loop
     (explorer.adapters.generation: Hugging Face's definitions, the model's own generation settings honoured);
  2. the model's activation record on (source, output) (explorer.adapters): cross-attention weights, scores,
     context vectors and the logits, from one teacher-forced pass.
Log-probabilities are always the model's own (temperature 1, no processor) on that pass, so greedy, beam and
forced decoding give the same sum of log p for the same output.

For the built-in RNN encoder-decoders each step also gets its arithmetic (StepMath): the score of the most attended
source position recomputed in float64 from the record's two sides of the score (q_t, k_j, v). Attention "none":
no alignment exists; the trace keeps the single context vector and, per output token, the log-probability with the
source summary and with it zeroed (how much each token relies on the final state).

Row t of every matrix belongs to output token y_t (the token produced at step t, the end token included when
emitted); columns are source tokens. Rows of attention weights sum to 1.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping, Protocol

import numpy as np
import torch

from explorer.adapters import generation as G
from explorer.adapters.base import CrossForm, Record, Unsupported
from explorer.adapters.protocols import Aligns, Loaded
from explorer.adapters.text import Encoded, no_text, shown_text
from explorer.adapters.generation import BeamTrace
from explorer.runtime import budget
from explorer.runtime.errors import ViewError

TOPK = 5
MAX_OUTPUT = 200          # hard cap on decoded tokens, whatever the source length
MAX_BEAM = 8
DECODINGS = ("greedy", "beam", "forced")
PART_DIMS = 6             # how many leading dimensions of the vectors in the equation are kept
#: the parts of each score formula, in the order of StepMath.parts
SCORE_PARTS = {
    "bahdanau": ("W_a s_{t-1}", "U_a h_j + b", r"\tanh(\dots)", "v_a"),
    "luong-dot": ("s_t", "h_j"),
    "luong-general": ("s_t", "W_a h_j"),
    "luong-concat": ("W_a' s_t", "W_a'' h_j", r"\tanh(\dots)", "v_a"),
}


@dataclass(frozen=True)
class StepMath:
    """Arithmetic of one step for the source position j with the largest weight.

    score_model: the score e_tj the model returned; score_recomputed: the same from the record's q_t, k_j (and v)
    in float64; weight: a_tj; max_score / denominator: softmax pieces, a_tj = exp(e_tj - max_score) / denominator;
    parts: (name, leading dims) of the vectors in the score formula; dim: their full size.
    """

    j: int
    score_model: float
    score_recomputed: float
    weight: float
    max_score: float
    denominator: float
    parts: tuple[tuple[str, tuple[float, ...]], ...]
    dim: int


@dataclass(frozen=True)
class AlignmentTrace:
    """One decoded (or forced) output for one source sentence.

    src_tokens (S,); out_tokens (T,) one per decoding step; out_ids (T,)
    weights (L, H, T, S) cross-attention (built-in RNN: L = H = 1) | None (no attention)
    scores (T, S) raw pre-softmax scores, contexts (T, Hd) c_t, states (T, Hd) the decoder state scored (built-in)
    step_logprobs (T,) log p(y_t | y_<t, x), the model's own; topk_ids / topk_probs (T, K), topk_tokens (T, K)
    no_source_logprobs (T,) attention "none" only: log p(y_t) with the source summary zeroed
    final_state (Hd,) the encoder's last state (the single context vector of "none")
    beam: the beam-search tree (mode "beam")
    """

    model_id: str
    kind: str                                  # "rnn" | "hf"
    attention: str                             # none | bahdanau | luong-dot | luong-general | luong-concat | cross
    mode: str                                  # greedy | beam | forced
    src_tokens: tuple[str, ...] = ()
    out_tokens: tuple[str, ...] = ()
    out_ids: tuple[int, ...] = ()
    output_text: str = ""
    weights: np.ndarray | None = None
    scores: np.ndarray | None = None
    contexts: np.ndarray | None = None
    states: np.ndarray | None = None
    step_logprobs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    topk_ids: np.ndarray = field(default_factory=lambda: np.zeros((0, TOPK), np.int64))
    topk_tokens: tuple[tuple[str, ...], ...] = ()
    topk_probs: np.ndarray = field(default_factory=lambda: np.zeros((0, TOPK), np.float32))
    math: tuple[StepMath | None, ...] = ()
    beam: BeamTrace | None = None
    beam_size: int = 1
    no_source_logprobs: np.ndarray | None = None
    final_state: np.ndarray | None = None
    finished: bool = True                      # the output ended with the end token (False: stopped at the cap)
    max_len: int = 0
    notes: tuple[str, ...] = ()                # informational (unknown words, truncation)
    warnings: tuple[str, ...] = ()             # the user should know (longer than training, cap reached)
    form: CrossForm | None = None              # what the checkpoint's attention computes, read from it

    @property
    def n_layers(self) -> int:
        return int(self.weights.shape[0]) if self.weights is not None else 0

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1]) if self.weights is not None else 0

    @property
    def loss(self) -> float:
        """Mean cross-entropy of the output tokens under the model (teacher-forced loss for mode "forced")."""
        return float(-np.mean(self.step_logprobs.astype(np.float64))) if len(self.step_logprobs) else float("nan")

    def matrix(self, layer: int | None = None, head: int | str | None = None) -> np.ndarray | None:
        """(T, S) weights to draw: layer `layer`, head `head` or "mean" over heads."""
        if self.weights is None:
            return None
        w = self.weights[min(int(layer or 0), self.n_layers - 1)]
        if head is None or head == "mean" or w.shape[0] == 1:
            return np.asarray(w.mean(axis=0))
        return np.asarray(w[int(head)])


class Seq2SeqError(ViewError, ValueError):
    """Nothing to align: a model that is not an encoder–decoder, a text it cannot read, a target with no tokens."""

    alert = "warning"


def _empty(loaded: Loaded, mode: str, attention: str, kind: str, notes: tuple[str, ...] = ()) -> AlignmentTrace:
    """A trace with no output (no source tokens): its notes say why."""
    return AlignmentTrace(getattr(loaded, "id", "?"), kind, attention, mode, notes=tuple(notes))


# =========================================================================================== entry point
def alignment_trace(loaded: Loaded, text: str, target: str = "", decoding: str = "greedy", beam: int = 4,
                    max_len: int | None = None) -> AlignmentTrace:
    """Decode `text` with `loaded` (greedy / beam of size `beam`), or force-decode `target` when it is non-empty.

    Raises Seq2SeqError when there is nothing to align (module docstring of Seq2SeqError); bad text otherwise gives
    a trace whose `warnings` and `notes` say what happened (no source tokens: no output).
    """
    decoding = decoding if decoding in DECODINGS else "greedy"
    mode = "forced" if no_text(target or "") is None else decoding
    beam = int(min(max(int(beam), 1), MAX_BEAM))
    if (adapter := loaded.caps.alignment) is None:
        what = {"encoder": "an encoder (it reads text but generates nothing)",
                "decoder": "a decoder-only language model (no source to align to)"}.get(
            loaded.family, f"a {loaded.family or 'non-seq2seq'} model")
        raise Seq2SeqError(loaded.adapter.reason or f"{loaded.id} is {what}, not an encoder–decoder: there is no "
                           "cross-attention between a source and an output. Pick a built-in seq2seq model or a "
                           "Hugging Face encoder–decoder (Marian, T5, BART).")
    attention = adapter.attention_kind
    kind = "hf" if attention == "cross" else "rnn"
    lanes, hf = (beam if mode == "beam" else 1), kind == "hf"
    src = adapter.encode(text or "", max_tokens=budget.cap_tokens(
        loaded.model, adapter.max_tokens, lambda shape, t: price(shape, t, lanes, _cap(loaded, t, max_len, hf)[0])))
    if not src.ids:
        if any("cannot read text" in n for n in src.notes):
            raise Seq2SeqError(" ".join(src.notes))
        said = tuple(n.replace("Type a sentence to see the model's internals.", "Type a source sentence to decode it.")
                     for n in src.notes)
        return _empty(loaded, mode, attention, kind, notes=said or ("Type a source sentence to decode it.",))
    notes, warnings = list(src.notes), []
    if src.n_unknown == len(src.ids):
        warnings.append("Every source token is unknown to the model: the output says nothing about your text.")
    cap, limit_warning = _cap(loaded, len(src.ids), max_len, kind == "hf")
    if limit_warning:
        warnings.append(limit_warning)
    x = torch.tensor([src.ids], dtype=torch.long, device=adapter.device)
    start = torch.tensor([adapter.decoder_start], dtype=torch.long, device=adapter.device)
    tree, steps = None, None
    try:
        if mode == "forced":
            out = adapter.encode(target, side="target")
            notes += out.notes
            if len(out.ids) > cap:
                notes.append(f"The target has {len(out.ids)} tokens; only the first {cap} are forced.")
                out = Encoded(out.ids[:cap], out.tokens[:cap], out.notes, True, out.n_unknown, out.special[:cap])
            if not out.ids:
                raise Seq2SeqError("The target text gives no tokens.")
        else:
            if mode == "beam":
                ids, _, tree = G.beam_search(adapter, x, start, G.Strategy("beam", num_beams=beam), cap)
            else:
                rows, _, steps = G.sample(adapter, x, start, G.Strategy("greedy"), cap, record=True)
                ids = rows[0]
            out = Encoded(tuple(ids), tuple(adapter.sequence_strings(ids)), (), False, 0,
                          tuple(i in adapter.eos_ids for i in ids))
        names = ("logits", "cross.*", "decoder.s", "encoder.final") if kind == "rnn" else ("logits", "cross.*.pattern")
        rec = adapter.run(src, names, target=out, steps=steps)  # the greedy loop's own steps: no second pass
        no_source = adapter.run(src, ("logits",), target=out, ablate_source=True) if attention == "none" else None
    except Unsupported as exc:
        raise Seq2SeqError(str(exc)) from None
    ids = list(out.ids)
    finished = bool(ids) and ids[-1] in adapter.eos_ids
    if mode == "greedy" and not finished:
        warnings.append(f"No end-of-sentence token within {cap} steps: the output was cut at the length cap.")
    logp = _log_softmax(rec["logits"])                                     # (T, V)
    at = np.arange(len(ids))
    k = min(TOPK, logp.shape[1])
    top = np.argpartition(-logp, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(logp, top, axis=1), axis=1, kind="stable"), axis=1)
    weights = rec.stack("cross.{l}.pattern").astype(np.float32) if rec.layers("cross.{l}.pattern") else None
    form = _form(adapter, notes)
    return AlignmentTrace(
        model_id=str(loaded.id), kind=kind, attention=attention, mode=mode, src_tokens=tuple(src.tokens),
        out_tokens=tuple(adapter.sequence_strings(ids)),
        out_ids=tuple(int(i) for i in ids), output_text=shown_text(adapter, ids), weights=weights,
        scores=rec["cross.0.scores"][0] if "cross.0.scores" in rec else None, contexts=rec.get("cross.0.context"),
        states=rec.get("decoder.s"), step_logprobs=logp[at, ids], topk_ids=top,
        topk_tokens=tuple(tuple(adapter.token_strings(r)) for r in top.tolist()),
        topk_probs=np.exp(np.take_along_axis(logp, top, axis=1)).astype(np.float32),
        math=_steps_math(rec, attention) if kind == "rnn" and "cross.0.q" in rec else (None,) * len(ids), beam=tree,
        beam_size=beam if mode == "beam" else 1,
        no_source_logprobs=_log_softmax(no_source["logits"])[at, ids] if no_source is not None else None,
        final_state=rec.get("encoder.final"), finished=finished, max_len=cap, notes=tuple(notes),
        warnings=tuple(warnings), form=form,
    )


def _form(adapter: Aligns, notes: list[str]) -> CrossForm | None:
    try:
        return adapter.cross_form()
    except Unsupported as exc:
        notes.append(str(exc))
        return None


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return np.asarray(z - np.log(np.exp(z).sum(axis=1, keepdims=True)))


def price(shape: budget.Shape, source: int, rows: int, new: int) -> budget.Price:
    """The price of decoding up to `new` tokens in `rows` rows (beams) after a `source`-token source, keeping the
    cross-attention of every step (new × source weights per layer and head, rows of them while beams run)."""
    attention = rows * new * source * max(shape.layers, 1) * max(shape.heads, 1) * budget.FLOAT_BYTES
    decoded = budget.generation(shape, source, rows, new)
    return budget.Price(decoded.seconds, decoded.bytes + attention, attention, device=decoded.device)


def _cap(loaded: Loaded, n_src: int, max_len: int | None, hf: bool) -> tuple[int, str]:
    """The output length cap, and a warning when the source is longer than any seen in training (built-ins)."""
    cap = MAX_OUTPUT if max_len is None else max(1, min(int(max_len), MAX_OUTPUT))
    limits = _train_limits(loaded)
    warning = ""
    if limits is not None:
        max_src, max_tgt = limits
        if max_len is None:
            cap = min(MAX_OUTPUT, max(max_tgt + 5, 2 * n_src + 10))
        if n_src > max_src:
            warning = (f"The source has {n_src} tokens; the longest source seen in training had {max_src}. The model "
                       f"still decodes it (at most {cap} output tokens), but expect errors.")
    elif max_len is None:
        cap = min(MAX_OUTPUT, 2 * n_src + 10)
    n_pos = getattr(getattr(loaded.model, "config", None), "max_position_embeddings", None)
    if hf and isinstance(n_pos, int) and n_pos > 1:
        cap = min(cap, n_pos - 1)
    return cap, warning


def _steps_math(rec: Record, attention: str) -> tuple[StepMath, ...]:
    """StepMath for every step: the score of each step's most attended source position, recomputed in float64
    from the record's q_t and k_j (and v): e = v · tanh(q + k) or q · k."""
    q, k = rec["cross.0.q"].astype(np.float64), rec["cross.0.k"].astype(np.float64)      # (T, A), (S, A)
    scores, alpha = rec["cross.0.scores"][0].astype(np.float64), rec["cross.0.pattern"][0].astype(np.float64)
    j = alpha.argmax(axis=1)                                                             # (T,)
    kj = k[j]                                                                            # (T, A)
    if "cross.0.v" in rec:
        v = rec["cross.0.v"].astype(np.float64)
        z = np.tanh(q + kj)
        e = z @ v
        vectors: tuple[np.ndarray, ...] = (q, kj, z, np.broadcast_to(v, z.shape))
    else:
        e = (q * kj).sum(axis=1)
        vectors = (q, kj)
    m = scores.max(axis=1)
    denom = np.exp(scores - m[:, None]).sum(axis=1)
    return tuple(StepMath(int(j[t]), float(scores[t, j[t]]), float(e[t]), float(alpha[t, j[t]]), float(m[t]),
                          float(denom[t]), tuple((name, tuple(float(x) for x in vec[t, :PART_DIMS]))
                                                 for name, vec in zip(SCORE_PARTS[attention], vectors)),
                          int(q.shape[1])) for t in range(len(j)))


# =========================================================================================== built-in data
class _Corpus(Protocol):
    """A generated parallel corpus (the modules explorer.data.dates and explorer.data.translation)."""

    @property
    def HELDOUT_SEED(self) -> int: ...

    def generate_pairs(self, n: int, seed: int = ...) -> list[tuple[list[str], list[str]]]: ...


def _data_module(loaded: Loaded) -> _Corpus:
    from explorer.data import dates, translation

    corpus = (getattr(loaded, "meta", {}) or {}).get("corpus") or {}
    return dates if corpus.get("generator") == "dates" else translation


@functools.lru_cache(maxsize=8)
def training_lengths(generator: str, n: int, seed: int) -> tuple[int, int]:
    """(longest source, longest target) in the regenerated training set of a built-in checkpoint."""
    from explorer.data import dates, translation

    mod = dates if generator == "dates" else translation
    pairs = mod.generate_pairs(n, seed)
    return max(len(s) for s, _ in pairs), max(len(t) for _, t in pairs)


def _train_limits(loaded: Loaded) -> tuple[int, int] | None:
    corpus = (getattr(loaded, "meta", {}) or {}).get("corpus") or {}
    gen, n, seed = corpus.get("generator"), corpus.get("n_train"), corpus.get("seed")
    if (gen not in ("translation", "dates") or not isinstance(n, int) or not isinstance(seed, int)
            or not 0 < n <= 50_000):
        return None
    return training_lengths(gen, n, seed)


# =========================================================================================== length curve
@dataclass(frozen=True)
class LengthCurve:
    """Exact-match accuracy per source-length bucket on held-out data.

    buckets ("1-3", "4-6", ...), accuracy (B,), n (B,); source says where the numbers come from."""

    model_id: str
    label: str
    buckets: tuple[str, ...] = ()
    accuracy: tuple[float, ...] = ()
    n: tuple[int, ...] = ()
    source: str = ""


def length_accuracy(loaded: Loaded, n_pairs: int = 300) -> LengthCurve:
    """Per-length exact match: from the checkpoint's meta["metrics"]["exact_match_by_source_length"] when
    stored, else computed (greedy) on `n_pairs` regenerated held-out pairs of the checkpoint's corpus. Raises
    Seq2SeqError for a model with no such curve (not a built-in seq2seq model)."""
    meta = getattr(loaded, "meta", {}) or {}
    attention = aligned.attention_kind if (aligned := loaded.caps.alignment) is not None else ""
    label = f"{loaded.id} ({attention})" if attention not in ("", "cross") else loaded.id
    if attention in ("", "cross"):
        raise Seq2SeqError("The accuracy-by-length curve needs a built-in seq2seq model (trained on the explorer's "
                           "generated corpora).")
    stored = stored_curve(loaded.id, meta)
    if stored is not None:
        n = sum(stored.n)
        return LengthCurve(loaded.id, label, stored.buckets, stored.accuracy, stored.n,
                           f"held-out metrics stored in the checkpoint ({n:,} pairs)")
    src_vocab, tgt_vocab = loaded.vocabs.get("src_vocab"), loaded.vocabs.get("tgt_vocab")
    if src_vocab is None or tgt_vocab is None:
        raise Seq2SeqError(f"{loaded.id} has no vocabularies to evaluate with.")
    from explorer.metrics import held_out as M

    mod = _data_module(loaded)
    pairs = mod.generate_pairs(n_pairs, mod.HELDOUT_SEED)
    srcs = [src_vocab.encode(s) for s, _ in pairs]
    refs = [tgt_vocab.encode(t) for _, t in pairs]
    with torch.inference_mode():
        assert aligned is not None  # an attention_kind of a built-in seq2seq (checked above)
        preds = G.greedy_batch(aligned, srcs, max(len(r) for r in refs) + 5)
    by = M.accuracy_by_length(preds, refs, srcs)
    items = list(by.items())
    return LengthCurve(loaded.id, label, tuple(k for k, _ in items), tuple(float(v["exact_match"]) for _, v in items),
                       tuple(int(v["n"]) for _, v in items),
                       f"computed now on {n_pairs} regenerated held-out pairs "
                       "(the checkpoint stores no per-length metrics)")


def presets_for(loaded: Loaded) -> list[str]:
    """Teaching sentences for this model: its translation examples (explorer.data.examples)."""
    return list(loaded.adapter.examples("translation").sentences)


def stored_curve(name: str, meta: object) -> LengthCurve | None:
    """The per-length curve stored in a seq2seq checkpoint's JSON meta, or None (also when `meta` is not a JSON
    object)."""
    if not isinstance(meta, dict):
        return None
    by = (meta.get("metrics") or {}).get("exact_match_by_source_length")
    if not isinstance(by, dict) or not by:
        return None
    try:
        items = sorted(by.items(), key=lambda kv: int(str(kv[0]).split("-")[0]))
        attention = (meta.get("config") or {}).get("attention", "")
        gen = (meta.get("corpus") or {}).get("generator", "")
        return LengthCurve(name if ":" in name else f"builtin:{name}", f"{name} ({attention}, {gen})",
                           tuple(k for k, _ in items),
                           tuple(float(v["exact_match"]) for _, v in items), tuple(int(v["n"]) for _, v in items),
                           "held-out metrics stored in the checkpoint")
    except (KeyError, TypeError, ValueError):
        return None


def corpus_of(loaded: Loaded) -> str:
    """The corpus generator a checkpoint was trained on, from its meta ("translation" when it names none)."""
    return str(((loaded.meta or {}).get("corpus") or {}).get("generator", "translation"))


def builtin_length_curves(metas: Mapping[str, object], generator: str = "translation") -> tuple[LengthCurve, ...]:
    """Stored per-length curves of the built-in seq2seq checkpoints (name -> JSON meta) trained on `generator`."""
    curves = (stored_curve(name, meta) for name, meta in sorted(metas.items()))
    return tuple(c for c in curves if c is not None and c.label.endswith(f", {generator})"))
