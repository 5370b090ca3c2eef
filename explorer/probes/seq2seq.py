"""Seq2seq alignment: model + source (+ optional target) -> AlignmentTrace of numpy arrays.

Two kinds of models behind one function, `alignment_trace(loaded, text, target, decoding, beam)`:

* built-in RNN encoder–decoders (explorer.models.seq2seq.Seq2Seq, family "seq2seq-rnn"): the decoder is stepped
  with the model's own `decode_step`; every step keeps the attention row a_t (S,), the raw scores e_t (S,), the
  context c_t (H,), the decoder state s the scores were computed from (s_{t-1} for Bahdanau, s_t for Luong), the
  top next-token candidates, and the score of the most-attended source position recomputed from the model's
  own W_a / U_a / v_a (StepMath; equals the returned score). Beam search is the model's own `beam_search`
  (its tree is kept); the best hypothesis is then replayed step by step.
  Attention "none": no alignment exists; the trace keeps the single context vector and, per output token, the
  log-probability with the source summary and with it zeroed (how much each token relies on the final state).
* Hugging Face encoder–decoders (Marian, T5, BART, ...): cross-attention weights (L, H, T, S) as the model
  returns them with eager attention. Greedy decoding steps the decoder with its KV cache and keeps each step's
  cross-attention; forced (teacher-forced) and beam-searched outputs are read with one forward pass over
  decoder_input_ids = [start] + y[:-1].

Row t of every matrix belongs to output token y_t (the token produced at step t, <eos> included when emitted);
columns are source tokens. Rows of attention weights sum to 1.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

TOPK = 5
MAX_OUTPUT = 200          # hard cap on decoded tokens, whatever the source length
MAX_SOURCE = 400          # longer sources are truncated (with a note)
MAX_BEAM = 10
DECODINGS = ("greedy", "beam", "forced")
PART_DIMS = 6             # how many leading dimensions of the vectors in the equation are kept


@dataclass(frozen=True)
class StepMath:
    """Arithmetic of one step for the source position j with the largest weight.

    score_model: the score e_tj the model returned; score_recomputed: the same from the weights (float64);
    weight: a_tj; max_score / denominator: softmax pieces, a_tj = exp(e_tj - max_score) / denominator;
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
class BeamNode:
    """One candidate of one beam step (see Seq2Seq.beam_search): parent = index among the previous step's
    "kept" candidates; status "kept" | "pruned" | "finished"."""

    step: int
    tokens: tuple[str, ...]
    score: float
    norm_score: float
    parent: int | None
    status: str


@dataclass(frozen=True)
class AlignmentTrace:
    """One decoded (or forced) output for one source sentence.

    src_tokens (S,); out_tokens (T,) one per decoding step; out_ids (T,)
    weights: built-in (T, S) | HF (L, H, T, S) | None (no attention)
    scores (T, S) raw pre-softmax scores, contexts (T, Hd) c_t, states (T, Hd) the decoder state scored (built-in)
    step_logprobs (T,) log p(y_t | y_<t, x); topk_ids / topk_probs (T, K), topk_tokens (T, K)
    no_source_logprobs (T,) attention "none" only: log p(y_t) with the source summary zeroed
    final_state (Hd,) the encoder's last state (the single context vector of "none")
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
    beam: tuple[tuple[BeamNode, ...], ...] = ()
    beam_size: int = 1
    no_source_logprobs: np.ndarray | None = None
    final_state: np.ndarray | None = None
    finished: bool = True                      # the output ended with <eos> (False: stopped at the length cap)
    max_len: int = 0
    notes: tuple[str, ...] = ()                # informational (unknown words, truncation)
    warnings: tuple[str, ...] = ()             # the user should know (longer than training, cap reached)
    error: str = ""                            # non-empty: nothing to show, say this instead

    @property
    def n_layers(self) -> int:
        return int(self.weights.shape[0]) if self.weights is not None and self.weights.ndim == 4 else 0

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1]) if self.weights is not None and self.weights.ndim == 4 else 0

    @property
    def loss(self) -> float:
        """Mean cross-entropy of the output tokens under the model (teacher-forced loss for mode "forced")."""
        return float(-np.mean(self.step_logprobs.astype(np.float64))) if len(self.step_logprobs) else float("nan")

    def matrix(self, layer: int | None = None, head: int | str | None = None) -> np.ndarray | None:
        """(T, S) weights to draw: the built-in's attention, or HF layer `layer`, head `head` or "mean" over heads."""
        if self.weights is None:
            return None
        if self.weights.ndim == 2:
            return self.weights
        w = self.weights[int(layer or 0)]
        if head is None or head == "mean":
            return w.mean(axis=0)
        return w[int(head)]


def _empty(loaded: Any, mode: str, attention: str, kind: str, error: str = "", notes: Sequence[str] = ()) -> AlignmentTrace:
    return AlignmentTrace(getattr(loaded, "id", "?"), kind, attention, mode, error=error, notes=tuple(notes))


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float32)


def _topk(logp: torch.Tensor, k: int = TOPK) -> tuple[list[int], list[float]]:
    k = min(k, logp.numel())
    vals, idx = logp.float().topk(k)
    ids = idx.tolist() + [-1] * (TOPK - k)
    probs = vals.exp().tolist() + [0.0] * (TOPK - k)
    return ids, probs


# =========================================================================================== entry point
def alignment_trace(loaded: Any, text: str, target: str = "", decoding: str = "greedy", beam: int = 4,
                    max_len: int | None = None) -> AlignmentTrace:
    """Decode `text` with `loaded` (greedy / beam of size `beam`), or force-decode `target` when it is non-empty.

    Never raises for bad input: the trace's `error` / `warnings` / `notes` say what happened.
    """
    decoding = decoding if decoding in DECODINGS else "greedy"
    mode = "forced" if (target or "").strip() else decoding
    beam = int(min(max(int(beam), 1), MAX_BEAM))
    model = getattr(loaded, "model", None)
    family = getattr(loaded, "family", "")
    if model is None:
        return _empty(loaded, mode, "", "", f"{getattr(loaded, 'id', 'This model')} is a bare state dict; this view "
                      "needs a built-in seq2seq model or a Hugging Face encoder–decoder.")
    from explorer.models.seq2seq import Seq2Seq

    if isinstance(model, Seq2Seq):
        return _rnn_trace(loaded, text, target, mode, beam, max_len)
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "is_encoder_decoder", False):
        return _hf_trace(loaded, text, target, mode, beam, max_len)
    kind = {"encoder": "an encoder (it reads text but generates nothing)",
            "decoder": "a decoder-only language model (no source to align to)"}.get(family, f"a {family or 'non-seq2seq'} model")
    return _empty(loaded, mode, "", "", f"{loaded.id} is {kind}, not an encoder–decoder: there is no cross-attention "
                  "between a source and an output. Pick a built-in seq2seq model or a Hugging Face encoder–decoder "
                  "(Marian, T5, BART).")


# =========================================================================================== built-in RNN
def _data_module(loaded: Any):
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


def _train_limits(loaded: Any) -> tuple[int, int] | None:
    corpus = (getattr(loaded, "meta", {}) or {}).get("corpus") or {}
    gen, n, seed = corpus.get("generator"), corpus.get("n_train"), corpus.get("seed")
    if gen not in ("translation", "dates") or not isinstance(n, int) or not isinstance(seed, int) or not 0 < n <= 50_000:
        return None
    return training_lengths(gen, n, seed)


def target_tokens(loaded: Any, target: str) -> list[str]:
    """Tokenize a target the user typed, as the checkpoint's target side was tokenized."""
    from explorer.data.vocab import clean_text, tokenize_words

    mod = _data_module(loaded)
    if mod.__name__.endswith("dates"):
        return [c for c in clean_text(target).lower() if not c.isspace()]
    return tokenize_words(target)


def _rnn_trace(loaded: Any, text: str, target: str, mode: str, beam: int, max_len: int | None) -> AlignmentTrace:
    from explorer.models.seq2seq import Seq2Seq

    model: Seq2Seq = loaded.model
    attention = model.attention_kind
    src_vocab, tgt_vocab = loaded.vocabs.get("src_vocab"), loaded.vocabs.get("tgt_vocab")
    if src_vocab is None or tgt_vocab is None:
        return _empty(loaded, mode, attention, "rnn", f"{loaded.id} has no source/target vocabulary "
                      "(src_vocab / tgt_vocab in its JSON), so it cannot read text.")
    mod = _data_module(loaded)
    words = mod.tokenize(text or "")
    if not words:
        return _empty(loaded, mode, attention, "rnn", notes=("Type a source sentence to decode it.",))
    notes: list[str] = []
    warnings: list[str] = []
    if len(words) > MAX_SOURCE:
        notes.append(f"The source has {len(words):,} tokens; only the first {MAX_SOURCE} are used.")
        words = words[:MAX_SOURCE]
    ids = src_vocab.encode(words)
    unknown = [w for w, i in zip(words, ids) if i == src_vocab.unk_id]
    if unknown:
        sample = ", ".join(repr(w) for w in dict.fromkeys(unknown[:8]))
        notes.append(f"{len(unknown)} source token(s) are not in the model's vocabulary and are read as <unk>: {sample}.")
    if len(unknown) == len(ids):
        warnings.append("Every source token is unknown to the model: the output says nothing about your text.")
    src_tokens = tuple(w if i != src_vocab.unk_id else "<unk>" for w, i in zip(words, ids))
    limits = _train_limits(loaded)
    cap = MAX_OUTPUT if max_len is None else max(1, min(int(max_len), MAX_OUTPUT))
    if limits is not None:
        max_src, max_tgt = limits
        if max_len is None:
            cap = min(MAX_OUTPUT, max(max_tgt + 5, 2 * len(ids) + 10))
        if len(ids) > max_src:
            warnings.append(f"The source has {len(ids)} tokens; the longest source seen in training had {max_src}. "
                            f"The model still decodes it (at most {cap} output tokens), but expect errors.")
    elif max_len is None:
        cap = min(MAX_OUTPUT, 2 * len(ids) + 10)

    device = next(model.parameters()).device
    src = torch.tensor([ids], dtype=torch.long, device=device)
    eos = model.eos_id
    forced: list[int] | None = None
    nodes: tuple[tuple[BeamNode, ...], ...] = ()
    if mode == "forced":
        toks = target_tokens(loaded, target)
        if len(toks) > MAX_OUTPUT - 1:
            notes.append(f"The target has {len(toks)} tokens; only the first {MAX_OUTPUT - 1} are forced.")
            toks = toks[:MAX_OUTPUT - 1]
        forced = tgt_vocab.encode(toks) + [eos]
        unk_t = [w for w, i in zip(toks, forced) if i == tgt_vocab.unk_id]
        if unk_t:
            notes.append(f"{len(unk_t)} target token(s) are not in the model's target vocabulary and are forced as "
                         f"<unk>: {', '.join(repr(w) for w in dict.fromkeys(unk_t[:8]))}.")
    with torch.inference_mode():
        if mode == "beam":
            res = model.beam_search(src, beam_size=beam, max_len=cap, length_penalty=1.0)
            best = list(res.tokens)
            ended = any(h.status == "finished" and list(h.tokens[:-1]) == best for step in res.steps for h in step)
            forced = best + ([eos] if ended else [])
            nodes = tuple(tuple(BeamNode(h.step, tuple(tgt_vocab.decode(h.tokens)), float(h.score), float(h.norm_score),
                                         h.parent, h.status) for h in step) for step in res.steps)
        out = _rnn_steps(model, src, forced, cap)
        if attention == "none":
            zero = _rnn_steps(model, src, out["ids"], len(out["ids"]), zero_source=True)
            out["no_source"] = zero["logp"]
    out_ids = out["ids"]
    finished = bool(out_ids) and out_ids[-1] == eos
    if mode == "greedy" and not finished:
        warnings.append(f"No end-of-sentence token within {cap} steps: the output was cut at the length cap.")
    out_tokens = tuple(tgt_vocab.decode(out_ids))
    words_out = [w for w, i in zip(out_tokens, out_ids) if i != eos]
    joiner = "" if mod.__name__.endswith("dates") else " "
    topk_tokens = tuple(tuple(tgt_vocab.decode([i for i in row if i >= 0]) + [""] * sum(1 for i in row if i < 0))
                        for row in out["topk_ids"])
    T = len(out_ids)
    return AlignmentTrace(
        model_id=loaded.id, kind="rnn", attention=attention, mode=mode, src_tokens=src_tokens,
        out_tokens=out_tokens, out_ids=tuple(out_ids), output_text=joiner.join(words_out),
        weights=np.stack(out["alpha"]).astype(np.float32) if out["alpha"] else None,
        scores=np.stack(out["scores"]).astype(np.float32) if out["scores"] else None,
        contexts=np.stack(out["ctx"]).astype(np.float32) if T else None,
        states=np.stack(out["s"]).astype(np.float32) if T else None,
        step_logprobs=np.asarray(out["logp"], np.float64),
        topk_ids=np.asarray(out["topk_ids"], np.int64).reshape(T, TOPK),
        topk_tokens=topk_tokens, topk_probs=np.asarray(out["topk_p"], np.float32).reshape(T, TOPK),
        math=tuple(out["math"]) if out["math"] else tuple([None] * T), beam=nodes, beam_size=beam if mode == "beam" else 1,
        no_source_logprobs=np.asarray(out["no_source"], np.float64) if "no_source" in out else None,
        final_state=out["final"], finished=finished, max_len=cap, notes=tuple(notes), warnings=tuple(warnings),
    )


def _rnn_steps(model: Any, src: torch.Tensor, forced: list[int] | None, cap: int, zero_source: bool = False) -> dict:
    """Step the model's own decode_step: greedy (forced=None, stops at <eos> or cap) or forced tokens.

    The loop only keeps tensors; numbers are read out once after it (fewer small host copies per step)."""
    mask = model.make_src_mask(src)
    enc, state = model.encode(src, mask)
    final = _f32(model.hidden(state)[-1, 0])
    if zero_source:  # "none": the decoder without its source summary (initial state and context both zero)
        enc = torch.zeros_like(enc)
        state = model.map_state(state, torch.zeros_like)
    y = torch.full((1,), model.bos_id, dtype=torch.long, device=src.device)
    n = len(forced) if forced is not None else cap
    forced_t = torch.tensor(forced, dtype=torch.long, device=src.device) if forced is not None else None
    luong = model.attention_kind.startswith("luong")
    logits, ctx, ss, alpha, scores, toks = [], [], [], [], [], []
    for t in range(n):
        s_prev = model.hidden(state)[-1, 0]
        step = model.decode_step(y, state, enc, mask)
        logits.append(step.logits[0])
        ctx.append(step.context[0])
        ss.append(model.hidden(step.state)[-1, 0] if luong else s_prev)
        if step.attention is not None:
            alpha.append(step.attention[0])
            scores.append(step.scores[0])
        state = step.state
        if forced_t is None:
            y = step.logits.argmax(-1)
            toks.append(y)
            if int(y) == model.eos_id:  # one host sync per step, as in Seq2Seq.greedy_decode
                break
        else:
            y = forced_t[t:t + 1]
    out: dict[str, Any] = {"final": final, "math": []}
    if not logits:
        out.update(ids=[], logp=[], alpha=[], scores=[], ctx=[], s=[], topk_ids=[], topk_p=[])
        return out
    logp = F.log_softmax(torch.stack(logits).float(), -1)                    # (T, V)
    ids_t = torch.cat(toks) if forced_t is None else forced_t[: len(logits)]
    k = min(TOPK, logp.size(-1))
    top_v, top_i = logp.topk(k, dim=-1)
    ids = ids_t.tolist()
    out["ids"] = ids
    out["logp"] = logp.gather(1, ids_t[:, None])[:, 0].tolist()
    pad = TOPK - k
    out["topk_ids"] = [r + [-1] * pad for r in top_i.tolist()]
    out["topk_p"] = [r + [0.0] * pad for r in top_v.exp().tolist()]
    out["ctx"] = list(_f32(torch.stack(ctx)))
    out["s"] = list(_f32(torch.stack(ss)))
    out["alpha"] = list(_f32(torch.stack(alpha))) if alpha else []
    out["scores"] = list(_f32(torch.stack(scores))) if scores else []
    if alpha:
        out["math"] = _steps_math(model, torch.stack(ss).double(), enc[0].double(), torch.stack(scores).double(),
                                  torch.stack(alpha).double())
    return out


def _steps_math(model: Any, s: torch.Tensor, h: torch.Tensor, scores: torch.Tensor, alpha: torch.Tensor) -> list:
    """StepMath for every step, recomputing the score of each step's most-attended source position from the
    attention module's own weights (float64). s (T, H) scored states, h (S, H) encoder outputs, scores/alpha (T, S)."""
    attn = model.attn
    kind = model.attention_kind
    j = alpha.argmax(dim=1)                                                    # (T,)
    hj = h[j]                                                                  # (T, H)
    if kind == "bahdanau":
        Ws = s @ attn.W_a.weight.double().T
        Uh = hj @ attn.U_a.weight.double().T + (attn.U_a.bias.double() if attn.U_a.bias is not None else 0.0)
        z = torch.tanh(Ws + Uh)
        v = attn.v_a.weight.double()[0]
        e = z @ v
        parts = [("W_a s_{t-1}", Ws), ("U_a h_j + b", Uh), ("tanh(...)", z), ("v_a", v.expand_as(z))]
    elif kind == "luong-dot":
        e = (s * hj).sum(1)
        parts = [("s_t", s), ("h_j", hj)]
    elif kind == "luong-general":
        Wh = hj @ attn.W_a.weight.double().T
        e = (s * Wh).sum(1)
        parts = [("s_t", s), ("W_a h_j", Wh)]
    else:  # luong-concat
        Wsh = torch.cat([s, hj], 1) @ attn.W_a.weight.double().T
        z = torch.tanh(Wsh)
        v = attn.v_a.weight.double()[0]
        e = z @ v
        parts = [("W_a [s_t; h_j]", Wsh), ("tanh(...)", z), ("v_a", v.expand_as(z))]
    m = scores.max(dim=1).values
    denom = torch.exp(scores - m[:, None]).sum(1)
    rows = torch.arange(scores.size(0), device=scores.device)
    dim = int(parts[-1][1].size(1))
    lead = [(name, x[:, :PART_DIMS].tolist()) for name, x in parts]
    js, e_l, sm, aw, ml, dl = (j.tolist(), e.tolist(), scores[rows, j].tolist(), alpha[rows, j].tolist(), m.tolist(),
                               denom.tolist())
    return [StepMath(js[t], sm[t], e_l[t], aw[t], ml[t], dl[t], tuple((name, tuple(x[t])) for name, x in lead), dim)
            for t in range(len(js))]


# =========================================================================================== Hugging Face
def _gen_attr(model: Any, name: str) -> Any:
    gc = getattr(model, "generation_config", None)
    value = getattr(gc, name, None) if gc is not None else None
    return value if value is not None else getattr(model.config, name, None)


def _hf_trace(loaded: Any, text: str, target: str, mode: str, beam: int, max_len: int | None) -> AlignmentTrace:
    from explorer.adapters.text import encode, model_max_tokens

    model = loaded.model
    tok = getattr(loaded, "tokenizer", None)
    if tok is None:
        return _empty(loaded, mode, "cross", "hf", f"{loaded.id} has no tokenizer saved with it, so it cannot read "
                      "text. Save one next to the weights (tokenizer.save_pretrained(<folder>)) and reload.")
    if getattr(model.config, "_attn_implementation", "eager") not in ("eager", None):
        return _empty(loaded, mode, "cross", "hf", f"{loaded.id} was not loaded with eager attention, so it cannot "
                      "return its cross-attention weights.")
    if not (text or "").strip():
        return _empty(loaded, mode, "cross", "hf", notes=("Type a source sentence to decode it.",))
    try:
        enc = encode(loaded, text, max_tokens=min(MAX_SOURCE, model_max_tokens(loaded)))
    except Exception as exc:  # a tokenizer that chokes on the input
        return _empty(loaded, mode, "cross", "hf", f"The tokenizer of {loaded.id} could not read this text "
                      f"({type(exc).__name__}: {str(exc)[:200]}).")
    if not enc.ids:
        return _empty(loaded, mode, "cross", "hf", notes=enc.notes or ("Type a source sentence to decode it.",))
    notes, warnings = list(enc.notes), []
    start = _gen_attr(model, "decoder_start_token_id")
    if start is None:
        start = getattr(model.config, "pad_token_id", None)
    if start is None:
        return _empty(loaded, mode, "cross", "hf", f"{loaded.id} defines no decoder_start_token_id, so its decoder "
                      "cannot be started.")
    eos = _gen_attr(model, "eos_token_id")
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else ([eos] if eos is not None else []))
    n_pos = getattr(model.config, "max_position_embeddings", None)
    cap = max(1, min(int(max_len) if max_len else 2 * len(enc.ids) + 10, MAX_OUTPUT,
                     int(n_pos) - 1 if isinstance(n_pos, int) and n_pos > 1 else MAX_OUTPUT))
    device = next(model.parameters()).device
    input_ids = torch.tensor([enc.ids], dtype=torch.long, device=device)
    attn_mask = torch.ones_like(input_ids)
    banned = [b[0] for b in (_gen_attr(model, "bad_words_ids") or []) if isinstance(b, (list, tuple)) and len(b) == 1]
    forced_bos = _gen_attr(model, "forced_bos_token_id")
    nodes: tuple[tuple[BeamNode, ...], ...] = ()
    names = lambda ids: tuple(str(t) for t in tok.convert_ids_to_tokens([int(i) for i in ids]))  # noqa: E731
    with torch.inference_mode():
        encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attn_mask, return_dict=True)
        if mode == "greedy":
            ids, logps, cross, topk = _hf_greedy(model, encoder_outputs, attn_mask, start, eos_ids, cap, banned, forced_bos)
            weights = np.stack(cross, axis=2) if cross else None  # (L, H, T, S)
        else:
            if mode == "forced":
                try:
                    ids = list(tok(text_target=target, add_special_tokens=True)["input_ids"])
                except Exception:
                    ids = list(tok(target, add_special_tokens=True)["input_ids"])
                if len(ids) > cap:
                    notes.append(f"The target has {len(ids)} tokens; only the first {cap} are forced.")
                    ids = ids[:cap]
                if not ids:
                    return _empty(loaded, mode, "cross", "hf", "The target text gives no tokens.")
            else:
                ids, nodes = _hf_beam(model, encoder_outputs, attn_mask, start, eos_ids, cap, beam, banned,
                                      forced_bos, names)
            logps, weights, topk = _hf_forward(model, encoder_outputs, attn_mask, start, ids)
    finished = bool(ids) and ids[-1] in eos_ids
    if mode == "greedy" and not finished:
        warnings.append(f"No end-of-sentence token within {cap} steps: the output was cut at the length cap.")
    T = len(ids)
    topk_ids = np.asarray([r[0] for r in topk], np.int64).reshape(T, TOPK)
    topk_tokens = tuple(names([i for i in row if i >= 0]) + ("",) * int((row < 0).sum()) for row in topk_ids)
    return AlignmentTrace(
        model_id=loaded.id, kind="hf", attention="cross", mode=mode, src_tokens=tuple(enc.tokens),
        out_tokens=names(ids), out_ids=tuple(int(i) for i in ids),
        output_text=tok.decode(ids, skip_special_tokens=True), weights=weights,
        step_logprobs=np.asarray(logps, np.float64), topk_ids=topk_ids, topk_tokens=topk_tokens,
        topk_probs=np.asarray([r[1] for r in topk], np.float32).reshape(T, TOPK), math=tuple([None] * T),
        beam=nodes, beam_size=beam if mode == "beam" else 1, finished=finished, max_len=cap, notes=tuple(notes),
        warnings=tuple(warnings),
    )


def _mask_logits(logits: torch.Tensor, step: int, banned: list[int], forced_bos: int | None) -> torch.Tensor:
    logits = logits.float()
    if banned:
        logits = logits.clone()
        logits[..., banned] = float("-inf")
    if step == 0 and forced_bos is not None:
        keep = logits[..., forced_bos].clone()
        logits = torch.full_like(logits, float("-inf"))
        logits[..., forced_bos] = keep
    return logits


def _hf_greedy(model, encoder_outputs, attn_mask, start, eos_ids, cap, banned, forced_bos):
    """Greedy decoding with the KV cache; keeps each step's cross-attention (L, H, S) and log-probabilities."""
    device = attn_mask.device
    y = torch.tensor([[start]], dtype=torch.long, device=device)
    past = None
    ids: list[int] = []
    logps: list[float] = []
    cross: list[np.ndarray] = []
    topk: list[tuple[list[int], list[float]]] = []
    for t in range(cap):
        out = model(encoder_outputs=encoder_outputs, attention_mask=attn_mask, decoder_input_ids=y,
                    past_key_values=past, use_cache=True, output_attentions=True, return_dict=True)
        past = out.past_key_values
        logp = F.log_softmax(_mask_logits(out.logits[0, -1], t, banned, forced_bos), -1)
        nxt = int(logp.argmax())
        ids.append(nxt)
        logps.append(float(logp[nxt]))
        topk.append(_topk(logp))
        cross.append(np.stack([_f32(a[0, :, -1, :]) for a in out.cross_attentions]))  # (L, H, S)
        if nxt in eos_ids:
            break
        y = torch.tensor([[nxt]], dtype=torch.long, device=device)
    return ids, logps, cross, topk


def _hf_forward(model, encoder_outputs, attn_mask, start, ids):
    """One teacher-forced pass over decoder_input_ids = [start] + ids[:-1]: log p(ids), cross-attention (L,H,T,S)."""
    device = attn_mask.device
    dec = torch.tensor([[start, *ids[:-1]]], dtype=torch.long, device=device)
    out = model(encoder_outputs=encoder_outputs, attention_mask=attn_mask, decoder_input_ids=dec,
                output_attentions=True, return_dict=True, use_cache=False)
    logp = F.log_softmax(out.logits[0].float(), -1)                       # (T, V)
    idx = torch.tensor(ids, dtype=torch.long, device=device)
    logps = logp.gather(1, idx[:, None])[:, 0].tolist()
    weights = np.stack([_f32(a[0]) for a in out.cross_attentions])        # (L, H, T, S)
    return logps, weights, [_topk(row) for row in logp]


def _hf_beam(model, encoder_outputs, attn_mask, start, eos_ids, cap, beam, banned, forced_bos, names: Callable):
    """Beam search with the same rules as Seq2Seq.beam_search (kept / pruned up to 2k / finished, GNMT length
    penalty alpha=1); each step re-reads every live prefix (no cache: small models, readable code)."""
    device = attn_mask.device
    live: list[list[int]] = [[]]
    live_scores = torch.zeros(1)
    finished: list[tuple[float, float, list[int]]] = []
    steps: list[tuple[BeamNode, ...]] = []
    hidden = encoder_outputs.last_hidden_state
    for t in range(cap):
        n = len(live)
        dec = torch.tensor([[start, *p] for p in live], dtype=torch.long, device=device)
        enc_n = type(encoder_outputs)(last_hidden_state=hidden.expand(n, -1, -1))
        out = model(encoder_outputs=enc_n, attention_mask=attn_mask.expand(n, -1), decoder_input_ids=dec,
                    use_cache=False, return_dict=True)
        logp = F.log_softmax(_mask_logits(out.logits[:, -1], t, banned, forced_bos), -1).cpu()
        V = logp.size(-1)
        total = (live_scores.unsqueeze(1) + logp).view(-1)
        top_s, top_i = total.topk(min(total.numel(), 2 * beam))
        record: list[BeamNode] = []
        nxt: list[tuple[list[int], float]] = []
        kept = 0
        for sc, idx in zip(top_s.tolist(), top_i.tolist()):
            if not math.isfinite(sc):
                continue
            parent, tok_id = divmod(idx, V)
            toks = live[parent] + [tok_id]
            norm = sc / (((5.0 + len(toks)) / 6.0) ** 1.0)
            if kept >= beam:
                record.append(BeamNode(t, names(toks), sc, norm, parent, "pruned"))
                continue
            kept += 1
            if tok_id in eos_ids:
                finished.append((norm, sc, toks))
                record.append(BeamNode(t, names(toks), sc, norm, parent, "finished"))
            else:
                nxt.append((toks, sc))
                record.append(BeamNode(t, names(toks), sc, norm, parent, "kept"))
        steps.append(tuple(record))
        if len(finished) >= beam or not nxt:
            break
        live = [p for p, _ in nxt]
        live_scores = torch.tensor([s for _, s in nxt])
    if not finished:
        for p, sc in zip(live, live_scores.tolist()):
            finished.append((sc / (((5.0 + len(p)) / 6.0) ** 1.0), sc, p))
    best = max(finished, key=lambda f: f[0])
    return list(best[2]), tuple(steps)


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
    error: str = ""


def length_accuracy(loaded: Any, n_pairs: int = 300) -> LengthCurve:
    """Per-length exact match: from the checkpoint's meta["metrics"]["exact_match_by_source_length"] when
    stored, else computed (greedy) on `n_pairs` regenerated held-out pairs of the checkpoint's corpus."""
    from explorer.models.seq2seq import Seq2Seq

    meta = getattr(loaded, "meta", {}) or {}
    label = f"{loaded.id} ({getattr(loaded.model, 'attention_kind', '')})" if isinstance(loaded.model, Seq2Seq) else loaded.id
    if not isinstance(loaded.model, Seq2Seq):
        return LengthCurve(loaded.id, label, error="The accuracy-by-length curve needs a built-in seq2seq model "
                           "(trained on the explorer's generated corpora).")
    by = (meta.get("metrics") or {}).get("exact_match_by_source_length")
    if isinstance(by, dict) and by:
        try:
            items = sorted(by.items(), key=lambda kv: int(str(kv[0]).split("-")[0]))
            return LengthCurve(loaded.id, label, tuple(k for k, _ in items),
                               tuple(float(v["exact_match"]) for _, v in items), tuple(int(v["n"]) for _, v in items),
                               f"held-out metrics stored in the checkpoint ({sum(int(v['n']) for _, v in items):,} pairs)")
        except (KeyError, TypeError, ValueError):
            pass
    src_vocab, tgt_vocab = loaded.vocabs.get("src_vocab"), loaded.vocabs.get("tgt_vocab")
    if src_vocab is None or tgt_vocab is None:
        return LengthCurve(loaded.id, label, error=f"{loaded.id} has no vocabularies to evaluate with.")
    from explorer import metrics as M

    mod = _data_module(loaded)
    pairs = mod.generate_pairs(n_pairs, mod.HELDOUT_SEED)
    srcs = [src_vocab.encode(s) for s, _ in pairs]
    refs = [tgt_vocab.encode(t) for _, t in pairs]
    device = next(loaded.model.parameters()).device
    with torch.inference_mode():
        preds = M.seq2seq_predictions(loaded.model, srcs, max_len=max(len(r) for r in refs) + 5, device=device)
    by = M.accuracy_by_length(preds, refs, srcs)
    items = list(by.items())
    return LengthCurve(loaded.id, label, tuple(k for k, _ in items), tuple(float(v["exact_match"]) for _, v in items),
                       tuple(int(v["n"]) for _, v in items),
                       f"computed now on {n_pairs} regenerated held-out pairs (the checkpoint stores no per-length metrics)")


def presets_for(loaded: Any) -> list[str]:
    """Teaching sentences for this model: the corpus presets (built-ins) or short English sentences (HF)."""
    from explorer.models.seq2seq import Seq2Seq

    if loaded is not None and isinstance(getattr(loaded, "model", None), Seq2Seq):
        return list(_data_module(loaded).PRESETS)
    return ["The agreement on the European Economic Area was signed in August 1992.",
            "The red car is fast.", "My French friends bought a new blue car yesterday.",
            "The old wooden table is in the kitchen."]


@functools.lru_cache(maxsize=32)
def _stored_curve(path: str, mtime: float) -> LengthCurve | None:
    from explorer.safe_load import read_json_file

    try:
        meta = read_json_file(path)
    except Exception:
        return None
    if not isinstance(meta, dict) or meta.get("architecture") != "seq2seq":
        return None
    by = (meta.get("metrics") or {}).get("exact_match_by_source_length")
    if not isinstance(by, dict) or not by:
        return None
    try:
        items = sorted(by.items(), key=lambda kv: int(str(kv[0]).split("-")[0]))
        name = str(meta.get("name") or path)
        attention = (meta.get("config") or {}).get("attention", "")
        gen = (meta.get("corpus") or {}).get("generator", "")
        return LengthCurve(f"builtin:{name}", f"{name} ({attention}, {gen})", tuple(k for k, _ in items),
                           tuple(float(v["exact_match"]) for _, v in items), tuple(int(v["n"]) for _, v in items),
                           "held-out metrics stored in the checkpoint")
    except (KeyError, TypeError, ValueError):
        return None


def builtin_length_curves(generator: str = "translation") -> tuple[LengthCurve, ...]:
    """Stored per-length curves of every built-in seq2seq checkpoint trained on `generator` (read from JSON)."""
    from explorer.registry import BUILTIN_DIR, builtin_names

    out = []
    for name in builtin_names():
        if not name.startswith("seq2seq"):
            continue
        path = BUILTIN_DIR / f"{name}.json"
        try:
            curve = _stored_curve(str(path), path.stat().st_mtime)
        except OSError:
            continue
        if curve is not None and f"{generator})" in curve.label:
            out.append(curve)
    return tuple(out)
