"""Decoding strategies on any causal LM, with Hugging Face's own definitions.

Every strategy is a list of `transformers.generation.logits_process` processors, built exactly as
`GenerationMixin._get_logits_processor` builds them (same classes, same order: repetition penalty,
no-repeat-n-gram, then for sampling temperature, top-k, top-p, min-p, typical), and the loops below follow
`GenerationMixin._sample` and `GenerationMixin._beam_search` step by step:

- greedy / sampling: scores = processors(input_ids, logits); sampling draws `torch.multinomial(softmax(scores), 1)`
  per step (one draw per row, the batch of n samples being the rows, as `num_return_sequences=n`), greedy takes
  the argmax; rows that produced EOS are padded afterwards.
- beam search: log_softmax, processors, add the running beam scores, keep the top 2·K continuations, the top K
  that did not stop continue, those that stopped (EOS or max length) enter the finished list with score
  sum_logprob / generated_length ** length_penalty (early_stopping=False heuristic).

So for a Hugging Face model the tokens equal `model.generate(GenerationConfig(...))` with the same seed
(tests/test_decoding.py checks it), and built-in models follow the identical definitions.
The global RNG is seeded inside `torch.random.fork_rng`, so the server's RNG state is left as it was.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from explorer import metrics_text as MT
from explorer.adapters.causal_lm import CannotGenerate, CausalLM, adapter_for

KINDS = ("greedy", "sample", "top-k", "top-p", "typical", "min-p", "beam")
LABELS = {
    "greedy": "Greedy",
    "sample": "Pure sampling",
    "top-k": "Top-k",
    "top-p": "Top-p (nucleus)",
    "typical": "Typical-p",
    "min-p": "Min-p",
    "beam": "Beam search",
}
SAMPLING = ("sample", "top-k", "top-p", "typical", "min-p")
MAX_BEAMS = 8
MAX_NEW = 200
MAX_SAMPLES = 20
BEAM_BUDGET = 800  # num_beams × new tokens: beyond this, the beam column generates fewer tokens
SAMPLE_BUDGET = 4000  # n samples × new tokens per strategy
TOP = 20


class DecodingError(ValueError):
    """Input that cannot be decoded; the message is shown to the user."""


# ------------------------------------------------------------------------------------------ strategy
@dataclass(frozen=True)
class Strategy:
    """One column: the decoding kind and every setting that can change its tokens."""

    kind: str
    temperature: float = 1.0
    top_k: int = 40
    top_p: float = 0.9
    typical_p: float = 0.9
    min_p: float = 0.1
    num_beams: int = 4
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0

    @property
    def do_sample(self) -> bool:
        return self.kind in SAMPLING

    @property
    def label(self) -> str:
        k = self.kind
        extra = {
            "sample": f"T={self.temperature:g}",
            "top-k": f"k={self.top_k}, T={self.temperature:g}",
            "top-p": f"p={self.top_p:g}, T={self.temperature:g}",
            "typical": f"p={self.typical_p:g}, T={self.temperature:g}",
            "min-p": f"min-p={self.min_p:g}, T={self.temperature:g}",
            "beam": f"{self.num_beams} beams, length penalty {self.length_penalty:g}",
        }.get(k, "")
        return f"{LABELS.get(k, k)}" + (f" ({extra})" if extra else "")

    def checked(self, vocab_size: int) -> tuple["Strategy", tuple[str, ...]]:
        """A copy with every setting in its valid range, and a message for each change (never raises)."""
        notes: list[str] = []
        s = self
        if s.kind not in KINDS:
            raise DecodingError(f"Unknown strategy '{s.kind}': use one of {', '.join(KINDS)}.")
        if s.do_sample and not (isinstance(s.temperature, (int, float)) and math.isfinite(s.temperature)
                                and s.temperature > 0):
            notes.append(f"{LABELS[s.kind]}: temperature {s.temperature} is not > 0 (T → 0 is greedy decoding; "
                         "choose Greedy for that). Using T = 1.")
            s = replace(s, temperature=1.0)
        if s.kind == "top-k":
            if s.top_k < 1:
                notes.append(f"Top-k: k = {s.top_k} keeps nothing; using k = 1 (greedy).")
                s = replace(s, top_k=1)
            elif s.top_k >= vocab_size:
                notes.append(f"Top-k: k = {s.top_k:,} is not smaller than the vocabulary ({vocab_size:,} tokens): "
                             "every token is kept, so this column is pure sampling.")
                s = replace(s, top_k=vocab_size)
        if s.kind == "top-p" and not 0 < s.top_p <= 1:
            notes.append(f"Top-p: p = {s.top_p} is outside (0, 1]; using p = 0.9.")
            s = replace(s, top_p=0.9)
        if s.kind == "typical" and not 0 < s.typical_p <= 1:
            notes.append(f"Typical-p: p = {s.typical_p} is outside (0, 1]; using 0.9.")
            s = replace(s, typical_p=0.9)
        if s.kind == "min-p" and not 0 <= s.min_p <= 1:
            notes.append(f"Min-p: {s.min_p} is outside [0, 1]; using 0.1.")
            s = replace(s, min_p=0.1)
        if s.kind == "beam" and not 1 <= s.num_beams <= MAX_BEAMS:
            nb = min(max(int(s.num_beams), 1), MAX_BEAMS)
            notes.append(f"Beam search: {s.num_beams} beams is outside 1…{MAX_BEAMS}; using {nb}.")
            s = replace(s, num_beams=nb)
        if not s.repetition_penalty > 0:
            notes.append(f"Repetition penalty {s.repetition_penalty} must be > 0; using 1 (off).")
            s = replace(s, repetition_penalty=1.0)
        if s.no_repeat_ngram_size < 0:
            s = replace(s, no_repeat_ngram_size=0)
        return s, tuple(notes)

    def processors(self, filters_only: bool = False) -> LogitsProcessorList:
        """The processors `model.generate` builds for these settings, in its order.

        filters_only: only the sampling warpers (temperature, top-k, ...), without the penalties.
        """
        procs = LogitsProcessorList()
        if not filters_only:
            if self.repetition_penalty != 1.0:
                procs.append(RepetitionPenaltyLogitsProcessor(self.repetition_penalty))
            if self.no_repeat_ngram_size > 0:
                procs.append(NoRepeatNGramLogitsProcessor(self.no_repeat_ngram_size))
        if self.do_sample:
            if self.temperature != 1.0:
                procs.append(TemperatureLogitsWarper(self.temperature))
            if self.kind == "top-k":
                procs.append(TopKLogitsWarper(top_k=self.top_k, min_tokens_to_keep=1))
            if self.kind == "top-p" and self.top_p < 1.0:
                procs.append(TopPLogitsWarper(top_p=self.top_p, min_tokens_to_keep=1))
            if self.kind == "min-p":
                procs.append(MinPLogitsWarper(min_p=self.min_p, min_tokens_to_keep=1))
            if self.kind == "typical" and self.typical_p < 1.0:
                procs.append(TypicalLogitsWarper(mass=self.typical_p, min_tokens_to_keep=1))
        return procs

    def generation_config(self, max_new: int, eos_id: int | None, pad_id: int | None, n: int = 1) -> Any:
        """The equivalent `transformers.GenerationConfig` (everything not used switched off explicitly)."""
        from transformers import GenerationConfig

        kw: dict[str, Any] = dict(max_new_tokens=max_new, min_length=0, do_sample=self.do_sample,
                                  eos_token_id=eos_id, pad_token_id=pad_id if pad_id is not None else eos_id,
                                  repetition_penalty=self.repetition_penalty,
                                  no_repeat_ngram_size=self.no_repeat_ngram_size)
        if self.kind == "beam":
            kw.update(num_beams=self.num_beams, length_penalty=self.length_penalty, early_stopping=False)
        if self.do_sample:
            kw.update(num_return_sequences=n, temperature=self.temperature, top_k=0, top_p=1.0, typical_p=1.0)
            if self.kind == "top-k":
                kw["top_k"] = self.top_k
            elif self.kind == "top-p":
                kw["top_p"] = self.top_p
            elif self.kind == "typical":
                kw["typical_p"] = self.typical_p
            elif self.kind == "min-p":
                kw["min_p"] = self.min_p
        return GenerationConfig(**kw)


# ------------------------------------------------------------------------------------------- traces
@dataclass(frozen=True)
class BeamTrace:
    """What beam search kept and pruned at each step s (S steps, C = 2·K candidates, K beams).

    parent: (S, C) index of the running beam (0..K-1 at step s-1) each candidate extends
    token: (S, C) token id; score: (S, C) accumulated (processed) log-probability of the candidate
    step_logprob: (S, C) log-probability of its last token alone; stopped: (S, C) EOS or max length
    running: (S, K) candidate indices that continue as the K running beams
    finished: (S, C) the candidate entered the list of finished hypotheses at that step
    token_str: (S, C) strings of the tokens
    """

    parent: np.ndarray
    token: np.ndarray
    score: np.ndarray
    step_logprob: np.ndarray
    stopped: np.ndarray
    running: np.ndarray
    finished: np.ndarray
    token_str: tuple[tuple[str, ...], ...]
    num_beams: int
    final_score: float  # sum logprob / length ** length_penalty of the returned hypothesis


@dataclass(frozen=True)
class Output:
    """One generated continuation: ids (generated only, EOS included), their strings, and the model's
    log-probability (temperature 1, no penalty: the model's own distribution) of each of them."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    text: str
    logprobs: np.ndarray  # (len(ids),)

    @property
    def metrics(self) -> dict[str, float | None]:
        return {
            "length": len(self.ids),
            "mean log-prob": MT.mean_logprob(self.logprobs),
            "perplexity": MT.perplexity(self.logprobs),
            "distinct-1": MT.distinct_n(self.ids, 1),
            "distinct-2": MT.distinct_n(self.ids, 2),
            "distinct-3": MT.distinct_n(self.ids, 3),
            "repetition rate": MT.repetition_rate(self.ids),
        }


@dataclass(frozen=True)
class Generation:
    """The n outputs of one strategy (outputs[0] is the one shown), its beam trace, notes and timing."""

    strategy: Strategy
    outputs: tuple[Output, ...]
    beam: BeamTrace | None
    notes: tuple[str, ...]
    seconds: float
    max_new: int

    def summary(self) -> dict[str, Any]:
        """Metrics over the n outputs: means of per-output metrics, self-BLEU, corpus distinct-n."""
        all_lp = np.concatenate([o.logprobs for o in self.outputs]) if self.outputs else np.zeros(0)
        seqs = [o.ids for o in self.outputs]
        deterministic = not self.strategy.do_sample
        return {
            "strategy": self.strategy.label,
            "kind": self.strategy.kind,
            "samples": len(self.outputs),
            "mean length": float(np.mean([len(o.ids) for o in self.outputs])) if self.outputs else 0.0,
            "mean log-prob": MT.mean_logprob(all_lp),
            "perplexity": MT.perplexity(all_lp),
            "distinct-1": MT.corpus_distinct_n(seqs, 1),
            "distinct-2": MT.corpus_distinct_n(seqs, 2),
            "distinct-3": MT.corpus_distinct_n(seqs, 3),
            "repetition rate": float(np.mean([MT.repetition_rate(s) for s in seqs])) if seqs else 0.0,
            "self-BLEU": MT.self_bleu(seqs),
            "deterministic": deterministic,
        }


@dataclass(frozen=True)
class DecodingRun:
    """Everything the page shows: the prompt as read, one Generation per strategy, notes."""

    model_id: str
    prompt_ids: tuple[int, ...]
    prompt_tokens: tuple[str, ...]
    prompt_text: str
    generations: tuple[Generation, ...]
    notes: tuple[str, ...]
    seed: int
    context_len: int | None
    is_encoder_decoder: bool
    start_ids: tuple[int, ...]  # what the decoder reads before the first new token (seq2seq: start token)


# --------------------------------------------------------------------------------------------- loops
def _stop_mask(tokens: torch.Tensor, eos_id: int | None) -> torch.Tensor:
    if eos_id is None:
        return torch.zeros_like(tokens, dtype=torch.bool)
    return tokens == eos_id


@torch.inference_mode()
def sample_loop(lm: CausalLM, prompt: torch.Tensor, decoder_start: torch.Tensor, strategy: Strategy, max_new: int,
                n: int, seed: int, eos_id: int | None) -> tuple[list[list[int]], list[list[float]]]:
    """Greedy or sampling for n rows (as `_sample` with num_return_sequences=n).

    prompt (1, T): model input (decoder prompt, or the encoder source for seq2seq); decoder_start (1, T0): the
    sequence the processors see (the prompt itself for decoder-only models). Returns per row the generated ids
    (up to and including EOS) and the raw model log-probability of each.
    """
    procs = strategy.processors()
    pad = eos_id if eos_id is not None else 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        seq = decoder_start.repeat(n, 1)
        logits, state = lm.prefill(prompt.repeat(n, 1))
        unfinished = torch.ones(n, dtype=torch.long, device=seq.device)
        out_ids: list[torch.Tensor] = []
        out_lp: list[torch.Tensor] = []
        for t in range(max_new):
            scores = procs(seq, logits)
            if strategy.do_sample:
                probs = torch.nn.functional.softmax(scores, dim=-1)
                nxt = torch.multinomial(probs, num_samples=1).squeeze(1)
            else:
                nxt = torch.argmax(scores, dim=-1)
            if eos_id is not None:
                nxt = nxt * unfinished + pad * (1 - unfinished)
            out_lp.append(torch.log_softmax(logits, dim=-1).gather(1, nxt[:, None]).squeeze(1))
            out_ids.append(nxt)
            seq = torch.cat([seq, nxt[:, None]], dim=-1)
            unfinished = unfinished & ~_stop_mask(nxt, eos_id).long()
            if t == max_new - 1 or not bool(unfinished.any()):
                break
            logits, state = lm.step(state, nxt)
    ids = torch.stack(out_ids, 1).tolist() if out_ids else [[] for _ in range(n)]
    lps = torch.stack(out_lp, 1).tolist() if out_lp else [[] for _ in range(n)]
    rows, row_lp = [], []
    for r, lp in zip(ids, lps):
        cut = r.index(eos_id) + 1 if eos_id is not None and eos_id in r else len(r)
        rows.append(r[:cut])
        row_lp.append(lp[:cut])
    return rows, row_lp


def _gather(tensor: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    while idx.dim() < tensor.dim():
        idx = idx.unsqueeze(-1)
    return torch.take_along_dim(tensor, idx, dim=1)


@torch.inference_mode()
def beam_loop(lm: CausalLM, prompt: torch.Tensor, decoder_start: torch.Tensor, strategy: Strategy, max_new: int,
              eos_id: int | None) -> tuple[list[int], BeamTrace]:
    """Beam search as `GenerationMixin._beam_search` (batch 1, early_stopping=False, 1 returned sequence)."""
    K = strategy.num_beams
    procs = strategy.processors()
    n_eos = 1 if eos_id is not None else 0
    C = max(2, 1 + n_eos) * K
    top_mask = torch.cat([torch.ones(K, dtype=torch.bool), torch.zeros(C - K, dtype=torch.bool)])
    P = decoder_start.shape[1]
    cur_len, max_length = P, P + max_new
    lp_pen = strategy.length_penalty
    fill = eos_id if eos_id is not None else -1
    dev = prompt.device
    top_mask = top_mask.to(dev)
    running_sequences = torch.full((1, K, max_length), fill, dtype=torch.int64, device=dev)
    running_sequences[:, :, :cur_len] = decoder_start[:, None, :]
    sequences = running_sequences.clone()
    running_scores = torch.zeros((1, K), dtype=torch.float, device=dev)
    running_scores[:, 1:] = -1e9
    beam_scores = torch.full((1, K), -1e9, dtype=torch.float, device=dev)
    is_finished = torch.zeros((1, K), dtype=torch.bool, device=dev)
    heur = torch.ones((1, 1), dtype=torch.bool, device=dev)
    running_bi = torch.full((1, K, max_new), -1, dtype=torch.int32, device=dev)
    beam_indices = running_bi.clone()
    rec: dict[str, list] = {k: [] for k in ("parent", "token", "score", "step", "stopped", "running", "finished")}

    flat = decoder_start.repeat(K, 1)
    logits, state = lm.prefill(prompt.repeat(K, 1))
    while True:
        log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
        log_probs = procs(flat, log_probs)
        V = log_probs.shape[-1]
        acc = (log_probs.view(1, K, V) + running_scores[:, :, None]).reshape(1, -1)
        topk_lp, topk_idx = torch.topk(acc, k=C)
        parent = topk_idx // V
        tok = topk_idx % V
        topk_bi = _gather(running_bi, parent)
        topk_seq = _gather(running_sequences, parent)
        topk_seq[:, :, cur_len] = tok
        topk_bi[:, :, cur_len - P] = parent.to(torch.int32)
        hits = (cur_len + 1 >= max_length) | _stop_mask(tok, eos_id)
        # running beams for the next step
        topk_running_lp = topk_lp + hits.to(torch.float32) * -1.0e9
        next_idx = torch.topk(topk_running_lp, k=K)[1]
        running_sequences = _gather(topk_seq, next_idx)
        running_scores = _gather(topk_running_lp, next_idx)
        running_bi = _gather(topk_bi, next_idx)
        # finished hypotheses
        did = hits & top_mask[None, :]
        fin_lp = topk_lp / ((cur_len + 1 - P) ** lp_pen)
        fin_lp += (~heur).to(torch.float32) * -1.0e9
        fin_lp += (~did) * -1.0e9
        merged_seq = torch.cat((sequences, topk_seq), dim=1)
        merged_scores = torch.cat((beam_scores, fin_lp), dim=1)
        merged_bi = torch.cat((beam_indices, topk_bi), dim=1)
        merged_fin = torch.cat((is_finished, did), dim=1)
        keep = torch.topk(merged_scores, k=K)[1]
        sequences = _gather(merged_seq, keep)
        beam_scores = _gather(merged_scores, keep)
        beam_indices = _gather(merged_bi, keep)
        is_finished = _gather(merged_fin, keep)
        # record the step
        step_lp = log_probs.reshape(-1)[topk_idx[0]]  # the candidate's own (processed) token log-prob
        entered = torch.zeros(C, dtype=torch.bool)
        for j in keep[0].tolist():
            if j >= K:
                entered[j - K] = True
        rec["parent"].append(parent[0].cpu().numpy())
        rec["token"].append(tok[0].cpu().numpy())
        rec["score"].append(topk_lp[0].float().cpu().numpy())
        rec["step"].append(step_lp.float().cpu().numpy())
        rec["stopped"].append(hits[0].cpu().numpy())
        rec["running"].append(next_idx[0].cpu().numpy())
        rec["finished"].append((entered & did[0].cpu()).numpy())

        beam_idx = running_bi[0, :, cur_len - P].long()
        cur_len += 1
        # early-stop heuristic (early_stopping=False: best possible = current length)
        best_running = running_scores[:, :1] / ((cur_len - P) ** lp_pen)
        worst_finished = torch.where(is_finished, torch.min(beam_scores, dim=1, keepdim=True)[0], -1.0e9)
        heur = heur & torch.any(best_running > worst_finished, dim=-1, keepdim=True)
        if not (bool(torch.any(heur)) and not bool(torch.all(hits))):
            break
        state = lm.reorder(state, beam_idx)
        flat = running_sequences[0, :, :cur_len]
        logits, state = lm.step(state, flat[:, -1])

    n_gen = int((beam_indices[0, 0] >= 0).sum())
    ids = sequences[0, 0, P:P + n_gen].tolist()
    S = len(rec["token"])
    tokens = np.stack(rec["token"]).astype(np.int64)
    strings = tuple(tuple(lm.token_strings(list(map(int, row)))) for row in tokens)
    trace = BeamTrace(
        parent=np.stack(rec["parent"]).astype(np.int64), token=tokens,
        score=np.stack(rec["score"]).astype(np.float32), step_logprob=np.stack(rec["step"]).astype(np.float32),
        stopped=np.stack(rec["stopped"]).astype(bool), running=np.stack(rec["running"]).astype(np.int64),
        finished=np.stack(rec["finished"]).astype(bool), token_str=strings, num_beams=K,
        final_score=float(beam_scores[0, 0]),
    )
    assert trace.token.shape == (S, C)
    return ids, trace


@torch.inference_mode()
def score_tokens(lm: CausalLM, prompt: torch.Tensor, ids: list[int]) -> list[float]:
    """The model's own log-probability (temperature 1, no penalty) of each of `ids` after the prompt."""
    if not ids:
        return []
    logits, state = lm.prefill(prompt)
    out = []
    for i, t in enumerate(ids):
        out.append(float(torch.log_softmax(logits[0], dim=-1)[t]))
        if i < len(ids) - 1:
            logits, state = lm.step(state, torch.tensor([t], device=prompt.device))
    return out


# ------------------------------------------------------------------------------------------- prompt
@dataclass(frozen=True)
class Prompt:
    model_input: tuple[int, ...]  # what prefill reads (decoder prompt, or encoder source)
    start: tuple[int, ...]  # the decoder sequence the processors see
    tokens: tuple[str, ...]
    notes: tuple[str, ...]
    max_new: int


def prepare_prompt(lm: CausalLM, loaded: Any, text: str, max_new: int) -> Prompt:
    """Encode the prompt; empty -> BOS; longer than the context -> keep the last tokens that fit (noted)."""
    from explorer.adapters.text import NOTHING_TO_READ, encode
    from explorer.data.vocab import clean_text

    notes: list[str] = []
    builtin = not lm.hf
    enc = encode(loaded, text, bos=builtin)
    if not enc.ids and enc.notes and "no vocabulary or tokenizer" in enc.notes[0]:
        raise DecodingError(f"{loaded.id} has no tokenizer or vocabulary, so the page cannot read text for it "
                            "(save a tokenizer next to the weights).")
    if not enc.ids and clean_text(text or "").strip() and NOTHING_TO_READ not in enc.notes:
        raise DecodingError(f"The tokenizer of {loaded.id} gives no tokens for this text (is a tokenizer saved with the weights?), so the page cannot read text for it.")
    ids = list(enc.ids)
    notes.extend(n for n in enc.notes if not n.startswith("Type a sentence"))
    if not ids:
        if lm.is_encoder_decoder:
            tok = loaded.tokenizer
            ids = list(tok("")["input_ids"]) if tok is not None else []
            ids = ids or [x for x in (lm.eos_id,) if x is not None]
            notes.append("Empty prompt: the encoder reads only the end-of-sequence token.")
        else:
            if lm.bos_id is None:
                raise DecodingError(f"The prompt is empty and {loaded.id} has no beginning-of-sequence token to start "
                                    "from: type a few words.")
            ids = [lm.bos_id]
            notes.append("Empty prompt: generation starts from the beginning-of-sequence token alone.")
    if lm.context_len is not None and not lm.sliding:
        if max_new >= lm.context_len:
            notes.append(f"{max_new} new tokens do not fit in the model's {lm.context_len} positions: "
                         f"generating {lm.context_len - 1}.")
            max_new = lm.context_len - 1
        room = lm.context_len - max_new
        if len(ids) > room:
            notes.append(f"The prompt has {len(ids):,} tokens; with {max_new} new ones only its last {room:,} fit in "
                         f"the model's {lm.context_len} positions, so the start was cut.")
            ids = ids[-room:]
    elif lm.sliding and lm.context_len is not None and len(ids) + max_new > lm.context_len:
        notes.append(f"Prompt + new tokens exceed the model's {lm.context_len} positions: each step reads only the "
                     f"last {lm.context_len} tokens (a sliding window, as nanoGPT's generate).")
    if lm.is_encoder_decoder:
        start = (lm.decoder_start_id,)
    else:
        start = tuple(ids)
    return Prompt(tuple(ids), start, tuple(lm.token_strings(ids)), tuple(notes), max_new)


# ------------------------------------------------------------------------------------------ drivers
def generate(lm: CausalLM, prompt: Prompt, strategy: Strategy, seed: int, n: int = 1,
             stop_at_eos: bool = True) -> Generation:
    """Run one strategy: n sampled rows (deterministic strategies: one output, repeated n times)."""
    t0 = time.perf_counter()
    strategy, notes = strategy.checked(lm.vocab_size)
    notes = list(notes)
    max_new = prompt.max_new
    dev = lm.device
    x = torch.tensor([prompt.model_input], dtype=torch.long, device=dev)
    start = torch.tensor([prompt.start], dtype=torch.long, device=dev)
    eos = lm.eos_id if stop_at_eos else None
    beam = None
    n = max(1, min(int(n), MAX_SAMPLES))
    if strategy.kind == "beam":
        if strategy.num_beams * max_new > BEAM_BUDGET:
            new = max(1, BEAM_BUDGET // strategy.num_beams)
            notes.append(f"Beam search: {strategy.num_beams} beams × {max_new} tokens is above the bound of "
                         f"{BEAM_BUDGET} beam-steps; this column generates {new} tokens.")
            max_new = new
        ids, beam = beam_loop(lm, x, start, strategy, max_new, eos)
        rows = [ids]
        lps = [score_tokens(lm, x, ids)] if not lm.is_encoder_decoder else [_score_seq2seq(lm, x, start, ids)]
    else:
        if not strategy.do_sample:
            n_run = 1
        else:
            n_run = n
            if n * max_new > SAMPLE_BUDGET:
                n_run = max(1, SAMPLE_BUDGET // max_new)
                notes.append(f"{n} samples × {max_new} tokens is above the bound of {SAMPLE_BUDGET}: "
                             f"drawing {n_run} samples.")
        rows, lps = sample_loop(lm, x, start, strategy, max_new, n_run, seed, eos)
    outputs = [Output(tuple(r), tuple(lm.token_strings(r)), lm.decode(r), np.asarray(lp, dtype=np.float32))
               for r, lp in zip(rows, lps)]
    if not strategy.do_sample and n > 1:
        outputs = outputs * n
    return Generation(strategy, tuple(outputs), beam, tuple(notes), time.perf_counter() - t0, max_new)


def _score_seq2seq(lm: CausalLM, x: torch.Tensor, start: torch.Tensor, ids: list[int]) -> list[float]:
    return score_tokens(lm, x, ids)  # prefill reads the source and the start token: same thing


def decode_all(loaded: Any, text: str, strategies: tuple[Strategy, ...], seed: int = 0, max_new: int = 30,
               n: int = 1, stop_at_eos: bool = True) -> DecodingRun:
    """The page's computation: every strategy on the same prompt and seed. Raises DecodingError/CannotGenerate."""
    lm = adapter_for(loaded)
    max_new = int(max_new)
    notes: list[str] = []
    if not 1 <= max_new <= MAX_NEW:
        notes.append(f"{max_new} new tokens is outside 1…{MAX_NEW}; using {min(max(max_new, 1), MAX_NEW)}.")
        max_new = min(max(max_new, 1), MAX_NEW)
    prompt = prepare_prompt(lm, loaded, text, max_new)
    notes.extend(prompt.notes)
    gens = tuple(generate(lm, prompt, s, seed, n, stop_at_eos) for s in strategies)
    return DecodingRun(str(loaded.id), prompt.model_input, prompt.tokens, lm.decode(list(prompt.model_input)), gens,
                       tuple(notes), int(seed), lm.context_len, lm.is_encoder_decoder, prompt.start)


# ---------------------------------------------------------------------------------------- per step
@dataclass(frozen=True)
class StepView:
    """The next-token distribution at one generated position of one output.

    ids/tokens (TOP,): the most probable tokens after the penalties, best first; raw_probs: the model's own
    softmax (T = 1, no penalty); probs: softmax(penalised logits / T) over the whole vocabulary; kept: True
    where the strategy's filters (at this T) keep the token; final: the distribution actually sampled from
    (kept tokens renormalised); chosen: the token generated at this step (rank in the whole vocabulary).
    """

    step: int
    ids: np.ndarray
    tokens: tuple[str, ...]
    logits: np.ndarray
    raw_probs: np.ndarray
    probs: np.ndarray
    kept: np.ndarray
    final: np.ndarray
    chosen: int
    chosen_token: str
    chosen_rank: int
    chosen_logit: float
    chosen_prob: float
    chosen_final: float
    log_z: float  # log Σ_j exp(z_j / T) over the vocabulary
    n_kept: int
    kept_mass: float  # probability mass (at T, before renormalising) of the kept tokens
    vocab_size: int
    temperature: float
    context: tuple[str, ...]


@torch.inference_mode()
def step_view(loaded: Any, model_input: tuple[int, ...], start: tuple[int, ...], generated: tuple[int, ...],
              strategy: Strategy, step: int, temperature: float, top: int = TOP) -> StepView:
    """Recompute the distribution before generated[step] with the strategy's filters at `temperature`."""
    lm = adapter_for(loaded)
    strategy, _ = strategy.checked(lm.vocab_size)
    dev = lm.device
    step = min(max(int(step), 0), max(len(generated) - 1, 0))
    prefix = list(generated[:step])
    x = torch.tensor([model_input], dtype=torch.long, device=dev)
    logits, state = lm.prefill(x)
    for t in prefix:
        logits, state = lm.step(state, torch.tensor([t], device=dev))
    seq = torch.tensor([list(start) + prefix], dtype=torch.long, device=dev)
    raw = torch.log_softmax(logits[0], dim=-1)
    pen = LogitsProcessorList(p for p in strategy.processors() if isinstance(
        p, (RepetitionPenaltyLogitsProcessor, NoRepeatNGramLogitsProcessor)))(seq, logits.clone())[0]
    T = float(temperature) if temperature and temperature > 0 else 1.0
    scaled = pen / T
    log_probs = torch.log_softmax(scaled, dim=-1)
    if strategy.do_sample:
        filt = replace(strategy, temperature=T).processors(filters_only=True)
        final_scores = filt(seq, pen[None].clone())[0]
    elif strategy.kind == "greedy":
        final_scores = torch.full_like(pen, float("-inf"))
        final_scores[int(torch.argmax(pen))] = 0.0
    else:  # beam: no token is filtered by a warper; the beams choose
        final_scores = pen / T
    final = torch.softmax(final_scores, dim=-1)
    kept_all = torch.isfinite(final_scores) & (final_scores > -1e8)
    order = torch.argsort(pen, descending=True, stable=True)
    top_ids = order[:top]
    chosen = int(generated[step]) if generated else int(torch.argmax(pen))
    rank = int((order == chosen).nonzero()[0, 0]) if generated else 0
    context = tuple(lm.token_strings(list(model_input) + prefix))[-12:]
    return StepView(
        step=step, ids=top_ids.cpu().numpy(), tokens=tuple(lm.token_strings(top_ids.tolist())),
        logits=pen[top_ids].float().cpu().numpy(), raw_probs=raw.exp()[top_ids].float().cpu().numpy(),
        probs=log_probs.exp()[top_ids].float().cpu().numpy(), kept=kept_all[top_ids].cpu().numpy(),
        final=final[top_ids].float().cpu().numpy(), chosen=chosen, chosen_token=lm.token_strings([chosen])[0],
        chosen_rank=rank, chosen_logit=float(pen[chosen]), chosen_prob=float(log_probs[chosen].exp()),
        chosen_final=float(final[chosen]), log_z=float(torch.logsumexp(scaled, dim=-1)),
        n_kept=int(kept_all.sum()), kept_mass=float(log_probs.exp()[kept_all].sum()), vocab_size=lm.vocab_size,
        temperature=T, context=context,
    )


def hf_generate(loaded: Any, model_input: tuple[int, ...], strategy: Strategy, seed: int, max_new: int,
                n: int = 1) -> list[list[int]]:
    """Reference: the same strategy through `model.generate(GenerationConfig)` (HF models only), seeded with
    torch.manual_seed(seed). Returns the generated ids of each returned row (EOS included, padding cut)."""
    lm = adapter_for(loaded)
    if not lm.hf:
        raise CannotGenerate("model.generate exists only for Hugging Face models.")
    strategy, _ = strategy.checked(lm.vocab_size)
    cfg = strategy.generation_config(max_new, lm.eos_id, lm.pad_id, n)
    x = torch.tensor([model_input], dtype=torch.long, device=lm.device)
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        out = loaded.model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=cfg)
    skip = 1 if lm.is_encoder_decoder else x.shape[1]
    rows = []
    for r in out[:, skip:].tolist():
        cut = r.index(lm.eos_id) + 1 if lm.eos_id is not None and lm.eos_id in r else len(r)
        rows.append(r[:cut])
    return rows


# ------------------------------------------------------------------------------------------ URL help
RANGES = {
    "temperature": (0.05, 3.0, "a temperature > 0 (0 would be greedy decoding: pick Greedy for that)"),
    "p": (0.05, 1.0, "a top-p in (0, 1]"),
    "typical": (0.05, 1.0, "a typical-p in (0, 1]"),
    "minp": (0.0, 1.0, "a min-p in [0, 1]"),
    "k": (1, 1000, "an integer k ≥ 1"),
    "beam": (1, MAX_BEAMS, f"1 to {MAX_BEAMS} beams"),
    "max_new": (1, MAX_NEW, f"1 to {MAX_NEW} new tokens"),
    "n": (1, MAX_SAMPLES, f"1 to {MAX_SAMPLES} samples"),
    "seed": (0, 2**31 - 1, "a seed ≥ 0"),
}


def check_url_values(raw: dict[str, str | None]) -> list[str]:
    """Messages for URL parameters that are out of range or not numbers (the widgets then use defaults)."""
    msgs = []
    for key, value in raw.items():
        if value is None or key not in RANGES:
            continue
        lo, hi, what = RANGES[key]
        try:
            x = float(value)
            ok = math.isfinite(x) and lo <= x <= hi
        except ValueError:
            ok = False
        if not ok:
            extra = ""
            if key == "k":
                try:
                    if float(value) > hi:
                        extra = " (k larger than the vocabulary keeps every token: that is pure sampling)"
                except ValueError:
                    pass
            msgs.append(f"?{key}={value[:40]} is not valid: expected {what}, from {lo} to {hi}{extra}. "
                        "The default is used.")
    return msgs


__all__ = ["KINDS", "LABELS", "Strategy", "Output", "Generation", "DecodingRun", "BeamTrace", "StepView",
           "DecodingError", "CannotGenerate", "decode_all", "generate", "sample_loop", "beam_loop", "step_view",
           "hf_generate", "prepare_prompt", "check_url_values", "field"]
