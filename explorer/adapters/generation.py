"""The one generation loop and the one beam search, for every model that can generate (adapter.start / step).

Both follow Hugging Face's definitions step by step (`GenerationMixin._sample` and `_beam_search`), with the
logits processors built as `GenerationMixin._get_logits_processor` builds them: the same classes in the same
order (the model's own generation settings, e.g. Marian's bad_words_ids and forced EOS, BART's forced BOS; then
repetition penalty, no-repeat n-gram, min new tokens; and for sampling temperature, top-k, top-p, min-p,
typical). So for a Hugging Face model the tokens equal `model.generate(...)` with the same settings and seed
(testkit/hf_reference.py checks it), and the built-in models follow the identical definitions.

  Sampling          greedy or sampling rows of one strategy; rows stop at an end token; the ids and the model's own
                    log-probability (temperature 1, no processor) of each generated token
  Beams             the 2·K candidates per step, the K running beams, the finished list ranked by
                    sum log p / generated_length ** length_penalty (early_stopping=False), and its tree (BeamTrace)
  together(...)     every track's rows side by side in one forward per step (one cache): the prompt read once, its
                    state copied to each row, each track choosing its own rows' tokens; a track that ends leaves
  sample(...), beam_search(...)   one track alone; sample can also return what each step computed (record=True),
                    so that a view needs no second pass to show it

Sampling draws from a torch.Generator seeded per call: the server's global RNG is never touched.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union, cast

import numpy as np
import torch
from explorer.runtime.hf_runtime import (
    ForcedBOSTokenLogitsProcessor, ForcedEOSTokenLogitsProcessor, LogitsProcessorList, MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor, MinPLogitsWarper, NoBadWordsLogitsProcessor, NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor, SuppressTokensAtBeginLogitsProcessor, SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, TypicalLogitsWarper)

from explorer.adapters.protocols import Generates
from explorer.adapters.text import unknown_word_id
from explorer.runtime.errors import ViewError

LABELS = {"greedy": "Greedy", "sample": "Pure sampling", "top-k": "Top-k", "top-p": "Top-p",
          "typical": "Typical-p", "min-p": "Min-p", "beam": "Beam search"}
SAMPLING = ("sample", "top-k", "top-p", "typical", "min-p")


class DecodingError(ViewError, ValueError):
    """Input that cannot be decoded; the message is shown to the user."""


@dataclass(frozen=True)
class Strategy:
    """One way to generate: the decoding kind and every setting that can change its tokens."""

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
    min_new_tokens: int = 0
    show_unknown: bool = False  # generate a word-level vocabulary's <unk> too (text.unknown_word_id); else left out

    @property
    def do_sample(self) -> bool:
        return self.kind in SAMPLING

    @property
    def label(self) -> str:
        extra = self.params_text
        return LABELS.get(self.kind, self.kind) + (f" ({extra})" if extra else "")

    @property
    def params_text(self) -> str:
        """The settings that shape this kind's choices, e.g. "k=40, T=1" ("" for greedy)."""
        return {
            "sample": f"T={self.temperature:g}",
            "top-k": f"k={self.top_k}, T={self.temperature:g}",
            "top-p": f"p={self.top_p:g}, T={self.temperature:g}",
            "typical": f"p={self.typical_p:g}, T={self.temperature:g}",
            "min-p": f"min-p={self.min_p:g}, T={self.temperature:g}",
            "beam": f"{self.num_beams} beams, length penalty {self.length_penalty:g}",
        }.get(self.kind, "")

    def warpers(self) -> LogitsProcessorList:
        """The sampling filters (temperature, then top-k / top-p / min-p / typical), in model.generate's order."""
        procs = LogitsProcessorList()
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


Step = tuple[torch.Tensor, dict[str, torch.Tensor]]  # one generation step: logits (B, V), what it recorded


def left_out(adapter: object, strategy: Strategy) -> int | None:
    """The unknown-word token `strategy` leaves out of generation on this model (None: nothing left out)."""
    return None if strategy.show_unknown else unknown_word_id(adapter)


class LeavesOut:
    """What a track left out: `unknown` the unknown-word id (None: none), `unknown_max` the largest probability the
    model gave it (T = 1, no processor) at any step of any row."""

    unknown: int | None = None
    unknown_max: float = 0.0

    def saw(self, own_log_probs: torch.Tensor) -> None:
        """own_log_probs (rows, V): the model's own log-probabilities at one step."""
        if self.unknown is not None:
            self.unknown_max = max(self.unknown_max, float(own_log_probs[:, self.unknown].exp().max()))

def processors(adapter: Generates, strategy: Strategy, prompt_len: int, max_new: int,
               stop_at_eos: bool = True, warpers: bool = True) -> LogitsProcessorList:
    """The processors `model.generate` builds for `strategy` on this model, in its order.

    prompt_len: length of the sequence the processors see before the first new token (the decoder's prompt, or
    its start tokens); max_new: new tokens at most; warpers=False leaves out the sampling filters."""
    settings = adapter.generation_settings()
    eos = torch.tensor(adapter.eos_ids if stop_at_eos else (), dtype=torch.long, device=str(adapter.device))
    procs = LogitsProcessorList()
    if (unknown := left_out(adapter, strategy)) is not None:  # <unk> is not a word: left out unless asked for
        procs.append(SuppressTokensLogitsProcessor([unknown], device=str(adapter.device)))
    if strategy.repetition_penalty != 1.0:
        procs.append(RepetitionPenaltyLogitsProcessor(strategy.repetition_penalty))
    if strategy.no_repeat_ngram_size > 0:
        procs.append(NoRepeatNGramLogitsProcessor(strategy.no_repeat_ngram_size))
    if settings.get("bad_words_ids"):
        procs.append(NoBadWordsLogitsProcessor(settings["bad_words_ids"], eos if len(eos) else None))
    if len(eos) and settings.get("min_length", 0) > 0:
        procs.append(MinLengthLogitsProcessor(settings["min_length"], eos, device=str(adapter.device)))
    min_new = max(strategy.min_new_tokens, settings.get("min_new_tokens") or 0)
    if len(eos) and min_new > 0:
        procs.append(MinNewTokensLengthLogitsProcessor(prompt_len, min_new, eos, device=str(adapter.device)))
    if settings.get("forced_bos_token_id") is not None:
        procs.append(ForcedBOSTokenLogitsProcessor(settings["forced_bos_token_id"]))
    if settings.get("forced_eos_token_id") is not None:
        procs.append(ForcedEOSTokenLogitsProcessor(prompt_len + max_new, settings["forced_eos_token_id"],
                                                   device=str(adapter.device)))
    if settings.get("suppress_tokens") is not None:
        procs.append(SuppressTokensLogitsProcessor(settings["suppress_tokens"], device=str(adapter.device)))
    if settings.get("begin_suppress_tokens") is not None:
        begin = prompt_len if prompt_len > 1 or settings.get("forced_bos_token_id") is None else prompt_len + 1
        procs.append(SuppressTokensAtBeginLogitsProcessor(settings["begin_suppress_tokens"], begin,
                                                          device=str(adapter.device)))
    if warpers:
        procs.extend(strategy.warpers())
    return procs


# ------------------------------------------------------------------------------------- rows side by side
class Sampling(LeavesOut):
    """Greedy or sampling rows of one strategy, as `GenerationMixin._sample`: its processors, its generator (seeded
    with `seed`: the stream the global RNG gives after torch.manual_seed(seed), which model.generate reads; the
    server's global RNG is left alone) and what the rows generated so far.

    seq (n, T0): the sequence the processors see (a decoder's prompt, or an encoder-decoder's start tokens)."""

    def __init__(self, adapter: Generates, seq: torch.Tensor, strategy: Strategy, max_new: int, seed: int = 0,
                 stop_at_eos: bool = True) -> None:
        self.procs = processors(adapter, strategy, seq.shape[1], max_new, stop_at_eos)
        self.unknown = left_out(adapter, strategy)
        self.eos = torch.tensor(adapter.eos_ids if stop_at_eos else (), dtype=torch.long, device=seq.device)
        self.pad = adapter.pad_id if adapter.pad_id is not None else (int(self.eos[0]) if len(self.eos) else 0)
        self.gen = torch.Generator(device=seq.device).manual_seed(seed) if strategy.do_sample else None
        self.seq, self.max_new, self.rows = seq, max_new, seq.shape[0]
        self.unfinished = torch.ones(self.rows, dtype=torch.long, device=seq.device)
        self.out_ids: list[torch.Tensor] = []
        self.out_lp: list[torch.Tensor] = []

    def advance(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Choose each row's next token from its logits (n, V). Returns (tokens (n,), the rows' order: 0..n-1) to
        go on, or None when every row has ended or max_new tokens are out."""
        scores = self.procs(cast(torch.LongTensor, self.seq), logits)
        if self.gen is not None:
            nxt = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1, generator=self.gen).squeeze(1)
        else:
            nxt = torch.argmax(scores, dim=-1)
        if len(self.eos):
            nxt = nxt * self.unfinished + self.pad * (1 - self.unfinished)
        own = torch.log_softmax(logits, dim=-1)
        self.saw(own)
        self.out_lp.append(own.gather(1, nxt[:, None]).squeeze(1))
        self.out_ids.append(nxt)
        self.seq = torch.cat([self.seq, nxt[:, None]], dim=-1)
        self.unfinished = self.unfinished & ~torch.isin(nxt, self.eos).long()
        if len(self.out_ids) == self.max_new or not bool(self.unfinished.any()):
            return None
        return nxt, torch.arange(self.rows, device=nxt.device)

    def partial_ids(self) -> list[int]:
        """Row 0's tokens so far."""
        return [int(t[0]) for t in self.out_ids]

    def result(self) -> tuple[list[list[int]], list[list[float]]]:
        """Per row the generated ids (up to and including the end token) and the model's own log-probability
        (temperature 1, no processor) of each."""
        ids = torch.stack(self.out_ids, 1).tolist() if self.out_ids else [[] for _ in range(self.rows)]
        lps = torch.stack(self.out_lp, 1).tolist() if self.out_lp else [[] for _ in range(self.rows)]
        ends = set(self.eos.tolist())
        rows, row_lp = [], []
        for r, lp in zip(ids, lps):
            cut = next((i + 1 for i, x in enumerate(r) if x in ends), len(r))
            rows.append(r[:cut])
            row_lp.append(lp[:cut])
        return rows, row_lp


Track = Union["Sampling", "Beams"]


@torch.inference_mode()
def together(adapter: Generates, model_input: torch.Tensor, tracks: Sequence[Track], record: bool = False,
             on_step: Callable[[int], None] | None = None,
             read: tuple[torch.Tensor, object] | None = None) -> list[Step]:
    """Run every track's rows side by side: one forward per step for all of them (one cache), each track choosing
    its own rows' tokens (its processors, generator, beams). A track that ends leaves the batch.

    model_input: what `adapter.start` reads, (1, T) for one prompt shared by every row (read once, its state then
    copied to each row) or (B, T) with B the tracks' rows. on_step(t): called once the tokens of step t (0-based)
    are chosen, before the next forward (what the tracks generated so far can be shown; an exception it raises ends
    the loop). With record=True returns, for row 0, each step's (logits (1, V), activations) as adapter.start /
    step returned them, else []. read: adapter.start's (logits, state) of model_input when it was read already
    (a copy: the loop changes it); record needs the prompt read here."""
    acts: dict[str, torch.Tensor] = {}
    if read is not None and not record:
        logits, state = read
    else:
        logits, state, acts = adapter.start(model_input, record)
    steps = [(logits[:1], {k: v[:1] for k, v in acts.items()})] if record else []
    total = sum(t.rows for t in tracks)
    if model_input.shape[0] != total:  # one prompt for every row: its state copied to each
        copy = torch.zeros(total, dtype=torch.long, device=logits.device)
        state, logits = adapter.reorder(state, copy), logits[copy]
    active, t = list(tracks), 0
    while active:
        tokens, order, going, offset = [], [], [], 0
        for track in active:
            chosen = track.advance(logits[offset:offset + track.rows])
            if chosen is not None:
                tokens.append(chosen[0])
                order.append(chosen[1] + offset)
                going.append(track)
            offset += track.rows
        if on_step is not None:
            on_step(t)
        t += 1
        if not going:
            break
        rows = torch.cat(order)
        if len(going) != len(active) or not torch.equal(rows, torch.arange(offset, device=rows.device)):
            state = adapter.reorder(state, rows)
        logits, state, acts = adapter.step(state, torch.cat(tokens), record)
        if record:
            steps.append((logits[:1], {k: v[:1] for k, v in acts.items()}))
        active = going
    return steps


def sample(adapter: Generates, model_input: torch.Tensor, seq: torch.Tensor, strategy: Strategy, max_new: int,
           seed: int = 0, stop_at_eos: bool = True,
           record: bool = False) -> tuple[list[list[int]], list[list[float]], list[Step]]:
    """Greedy or sampling, one row per row of `seq` (as `_sample`; n samples: n copies of the prompt).

    model_input (B, T) or (1, T): what `adapter.start` reads (a decoder's prompt, or an encoder-decoder's sources);
    seq (B, T0): the sequence the processors see (the prompt itself, or the decoder's start tokens).
    Returns per row the generated ids (up to and including the end token) and the model's own log-probability
    (temperature 1, no processor) of each; with record=True also, for row 0, each step's (logits (1, V),
    activations) as adapter.start / step returned them (one per generated token), else []."""
    track = Sampling(adapter, seq, strategy, max_new, seed, stop_at_eos)
    steps = together(adapter, model_input, [track], record)
    rows, row_lp = track.result()
    return rows, row_lp, steps[:len(rows[0])]


def greedy_batch(adapter: Generates, sources: list[list[int]], max_new: int, batch_size: int = 256) -> list[list[int]]:
    """Greedy outputs of an encoder-decoder for many sources (padded with its pad id), without the end token."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    result: dict[int, list[int]] = {}
    pad = adapter.pad_id if adapter.pad_id is not None else 0
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        width = max(1, max(len(sources[j]) for j in idx))
        src = torch.tensor([sources[j] + [pad] * (width - len(sources[j])) for j in idx], device=str(adapter.device))
        start = torch.tensor([list(adapter.decoder_start)] * len(idx), device=str(adapter.device))
        rows = sample(adapter, src, start, Strategy("greedy"), max_new)[0]
        for j, r in zip(idx, rows):
            result[j] = [x for x in r if x not in adapter.eos_ids]
    return [result[i] for i in range(len(sources))]


# ------------------------------------------------------------------------------------------- beam search
@dataclass(frozen=True)
class BeamTrace:
    """What beam search kept and pruned at each step s (S steps, C = 2·K candidates, K beams).

    parent: (S, C) index of the running beam (0..K-1 at step s-1) each candidate extends
    token: (S, C) token id; score: (S, C) accumulated (processed) log-probability of the candidate
    step_logprob: (S, C) log-probability of its last token alone; stopped: (S, C) an end token or max length
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
    length_penalty: float
    final_score: float  # sum log p / generated_length ** length_penalty of the returned hypothesis


def _gather(tensor: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    while idx.dim() < tensor.dim():
        idx = idx.unsqueeze(-1)
    return torch.take_along_dim(tensor, idx, dim=1)


class Beams(LeavesOut):
    """Beam search as `GenerationMixin._beam_search` (one prompt, early_stopping=False, 1 returned sequence): the K
    running beams are K rows; each step keeps 2·K candidates, the K best running ones, and the finished list ranked
    by sum log p / generated_length ** length_penalty; what each step kept and pruned is recorded (BeamTrace).

    seq (1, T0): the sequence the processors see, as for Sampling."""

    def __init__(self, adapter: Generates, seq: torch.Tensor, strategy: Strategy, max_new: int,
                 stop_at_eos: bool = True) -> None:
        K = self.rows = strategy.num_beams
        self.adapter = adapter
        self.procs = processors(adapter, strategy, seq.shape[1], max_new, stop_at_eos, warpers=False)
        self.unknown = left_out(adapter, strategy)
        self.eos = torch.tensor(adapter.eos_ids if stop_at_eos else (), dtype=torch.long, device=seq.device)
        self.C = max(2, 1 + len(self.eos)) * K
        dev = seq.device
        self.top_mask = torch.cat([torch.ones(K, dtype=torch.bool), torch.zeros(self.C - K, dtype=torch.bool)]).to(dev)
        self.P = self.cur_len = seq.shape[1]
        self.max_length = self.P + max_new
        self.lp_pen = strategy.length_penalty
        fill = int(self.eos[0]) if len(self.eos) else -1
        self.running_sequences = torch.full((1, K, self.max_length), fill, dtype=torch.int64, device=dev)
        self.running_sequences[:, :, :self.cur_len] = seq[:, None, :]
        self.sequences = self.running_sequences.clone()
        self.running_scores = torch.zeros((1, K), dtype=torch.float, device=dev)
        self.running_scores[:, 1:] = -1e9
        self.beam_scores = torch.full((1, K), -1e9, dtype=torch.float, device=dev)
        self.is_finished = torch.zeros((1, K), dtype=torch.bool, device=dev)
        self.heur = torch.ones((1, 1), dtype=torch.bool, device=dev)
        self.running_raw = torch.zeros((1, K, max_new), dtype=torch.float, device=dev)  # the model's own log p
        self.raw = self.running_raw.clone()
        self.rec: dict[str, list[np.ndarray]] = {k: [] for k in ("parent", "token", "score", "step", "stopped",
                                                                 "running", "finished")}
        self.flat = seq.repeat(K, 1)

    def advance(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """One step from the running beams' logits (K, V). Returns (each new running beam's last token (K,), the row
        it continues (K,)) to go on, or None when the search is over."""
        K, C, P, eos = self.rows, self.C, self.P, self.eos
        own = torch.log_softmax(logits, dim=-1)
        self.saw(own)
        log_probs = self.procs(cast(torch.LongTensor, self.flat), own.clone())
        V = log_probs.shape[-1]
        acc = (log_probs.view(1, K, V) + self.running_scores[:, :, None]).reshape(1, -1)
        topk_lp, topk_idx = torch.topk(acc, k=C)
        parent = topk_idx // V
        tok = topk_idx % V
        topk_seq = _gather(self.running_sequences, parent)
        topk_seq[:, :, self.cur_len] = tok
        topk_raw = _gather(self.running_raw, parent)
        topk_raw[:, :, self.cur_len - P] = own.reshape(-1)[topk_idx[0]]
        hits = (self.cur_len + 1 >= self.max_length) | torch.isin(tok, eos)
        # running beams for the next step
        topk_running_lp = topk_lp + hits.to(torch.float32) * -1.0e9
        next_idx = torch.topk(topk_running_lp, k=K)[1]
        self.running_sequences = _gather(topk_seq, next_idx)
        self.running_scores = _gather(topk_running_lp, next_idx)
        self.running_raw = _gather(topk_raw, next_idx)
        # finished hypotheses
        did = hits & self.top_mask[None, :]
        fin_lp = topk_lp / ((self.cur_len + 1 - P) ** self.lp_pen)
        fin_lp += (~self.heur).to(torch.float32) * -1.0e9
        fin_lp += (~did) * -1.0e9
        keep = torch.topk(torch.cat((self.beam_scores, fin_lp), dim=1), k=K)[1]
        self.sequences = _gather(torch.cat((self.sequences, topk_seq), dim=1), keep)
        self.beam_scores = _gather(torch.cat((self.beam_scores, fin_lp), dim=1), keep)
        self.raw = _gather(torch.cat((self.raw, topk_raw), dim=1), keep)
        self.is_finished = _gather(torch.cat((self.is_finished, did), dim=1), keep)
        # record the step
        entered = torch.zeros(C, dtype=torch.bool)
        for j in keep[0].tolist():
            if j >= K:
                entered[j - K] = True
        rec = self.rec
        rec["parent"].append(parent[0].cpu().numpy())
        rec["token"].append(tok[0].cpu().numpy())
        rec["score"].append(topk_lp[0].float().cpu().numpy())
        rec["step"].append(log_probs.reshape(-1)[topk_idx[0]].float().cpu().numpy())
        rec["stopped"].append(hits[0].cpu().numpy())
        rec["running"].append(next_idx[0].cpu().numpy())
        rec["finished"].append((entered & did[0].cpu()).numpy())

        beam_idx = parent[0, next_idx[0]]
        self.cur_len += 1
        # early-stop heuristic (early_stopping=False: best possible = current length)
        best_running = self.running_scores[:, :1] / ((self.cur_len - P) ** self.lp_pen)
        worst_finished = torch.where(self.is_finished, torch.min(self.beam_scores, dim=1, keepdim=True)[0], -1.0e9)
        self.heur = self.heur & torch.any(best_running > worst_finished, dim=-1, keepdim=True)
        if not (bool(torch.any(self.heur)) and not bool(torch.all(hits))):
            return None
        self.flat = self.running_sequences[0, :, :self.cur_len]
        return self.flat[:, -1], beam_idx

    def partial_ids(self) -> list[int]:
        """The best running beam's tokens so far."""
        return self.running_sequences[0, 0, self.P:self.cur_len].tolist()

    def result(self) -> tuple[list[int], list[float], BeamTrace]:
        """The best hypothesis's ids (its end token included), the model's own log-probability (temperature 1, no
        processor) of each, and the tree."""
        P = self.P
        best = self.sequences[0, 0, P:].tolist()
        ends = set(self.eos.tolist())
        n_gen = next((i + 1 for i, x in enumerate(best) if x in ends), len(best))
        n_gen = min(n_gen, self.cur_len - P)
        rec = self.rec
        tokens = np.stack(rec["token"]).astype(np.int64)
        trace = BeamTrace(
            parent=np.stack(rec["parent"]).astype(np.int64), token=tokens,
            score=np.stack(rec["score"]).astype(np.float32), step_logprob=np.stack(rec["step"]).astype(np.float32),
            stopped=np.stack(rec["stopped"]).astype(bool), running=np.stack(rec["running"]).astype(np.int64),
            finished=np.stack(rec["finished"]).astype(bool),
            token_str=tuple(tuple(self.adapter.token_strings(list(map(int, row)))) for row in tokens),
            num_beams=self.rows, length_penalty=float(self.lp_pen), final_score=float(self.beam_scores[0, 0]),
        )
        return best[:n_gen], self.raw[0, 0, :n_gen].tolist(), trace


def beam_search(adapter: Generates, model_input: torch.Tensor, seq: torch.Tensor, strategy: Strategy, max_new: int,
                stop_at_eos: bool = True) -> tuple[list[int], list[float], BeamTrace]:
    """Beam search (Beams) on one prompt: model_input (1, T), seq (1, T0) as for `sample`. Returns the best
    hypothesis's ids (its end token included), the model's own log-probability of each, and the tree."""
    beams = Beams(adapter, seq, strategy, max_new, stop_at_eos)
    together(adapter, model_input, [beams])
    return beams.result()
