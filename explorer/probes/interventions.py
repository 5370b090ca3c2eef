"""Interventions: which layer, position, head or unit makes a model prefer one continuation to another.

Two prompts of the same length in tokens, clean ("The Eiffel Tower is in the city of") and corrupted ("The Colosseum
is in the city of"), and two continuations, the answer (Paris) and the wrong one (Rome). The metric is the logit
difference after the last token, LD = logit(answer) − logit(wrong) (Wang et al. 2022). A recurrent classifier or
tagger is patched the same way toward one of its labels: LD = logit(label A) − logit(label B) of its task head, read
where the head reads (a classifier: its pooled states; a tagger: the prompt's last word).

Activation patching (causal tracing, Meng et al. 2022; Heimersheim & Nanda 2024): one prompt is run with one
activation taken from the run of the other. Denoising: the corrupted run with one clean activation, restored =
(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 1 when that activation alone brings back the clean
preference, 0 when it changes nothing. Noising: the clean run with one corrupted activation; the same fraction is then
the share of the clean preference that survives it (1: the activation was not needed).

Attribution patching (Nanda 2023): LD_patched − LD_base ≈ (a_source − a_base) · ∂LD/∂a at the base run, for every
site at once, from one forward and one backward pass of the base prompt and one forward pass of the other.

Ablation: chosen heads, MLP layers or recurrent units replaced by zero, their mean over the prompts' positions, or
their value in the corrupted prompt (resample), and the top next tokens compared.

Every run goes through the adapter's interventions (explorer.adapters.interventions): sites named as in the
activation record. Shapes: L layers (grid rows; the residual stream has L + 1), T tokens, H heads.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import torch

from explorer.adapters.base import Unsupported
from explorer.adapters.interventions import Layout, Patch, PatchedRun
from explorer.adapters.task_head import POOLING_WHAT, TaskHead, not_a_language_model
from explorer.adapters.protocols import Intervenes, Loaded
from explorer.adapters.text import TYPE_A_SENTENCE, unknown_word_id, without_unknown
from explorer.runtime import budget
from explorer.runtime.errors import ViewError
from explorer.text.token_text import readable

MAX_TOKENS = 48  # a prompt's tokens (the rest is cut, with a note): a residual grid runs (L + 1)·T patched rows
BATCH_TOKENS = 4096  # tokens per patched batch
KINDS = {"resid": "residual stream", "attn": "attention output", "mlp": "MLP output", "heads": "attention heads",
         "h": "hidden state h", "c": "cell state c"}
ABLATIONS = ("zero", "mean", "resample")
Progress = Callable[..., None]  # progress(fraction, what[, the grid so far])


class InterventionError(ViewError, ValueError):
    """The prompts or the model cannot be patched as asked; str() is a message for the user."""

    alert = "info"


# --------------------------------------------------------------------------------------------- the contrast
@dataclass(frozen=True)
class Metric:
    """The metric of one run: ld = logit(answer) − logit(wrong) after the last token, and the two probabilities."""

    ld: float
    p_answer: float
    p_wrong: float


@dataclass(frozen=True)
class Contrast:
    """The two prompts as fed (T tokens each, `differs` (T,) where they differ) and the two continuations: the answer
    and the wrong one as the model reads them after the prompt (their first token: id and shown text)."""

    model_id: str
    tokens: tuple[str, ...]
    corrupt_tokens: tuple[str, ...]
    ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    answer_id: int
    wrong_id: int
    answer: str
    wrong: str
    clean: Metric
    corrupted: Metric
    notes: tuple[str, ...] = ()
    reads: str = "after the last token"  # where the metric is read (a task model: its head's input)
    last_state: bool = True  # the readout reads the top layer's state at the last position alone

    @property
    def differs(self) -> np.ndarray:
        return np.array([a != b for a, b in zip(self.ids, self.corrupt_ids)])

    def restored(self, ld: np.ndarray | float) -> np.ndarray:
        """(LD − LD_corrupted) / (LD_clean − LD_corrupted), elementwise."""
        return (np.asarray(ld, dtype=np.float64) - self.corrupted.ld) / (self.clean.ld - self.corrupted.ld)


def layout(loaded: Loaded) -> Layout:
    """What the model offers to patch (InterventionError when nothing)."""
    return _adapter(loaded)[1]


def _adapter(loaded: Loaded) -> tuple[Intervenes, Layout]:
    adapter = loaded.caps.patching
    if adapter is None and (task := not_a_language_model(loaded, "predicts no next word, and this view patches a "
                                                                  "task model's label only in recurrent classifiers "
                                                                  "and taggers")):
        raise InterventionError(task)
    if adapter is None or (layout := adapter.intervention_layout()) is None:
        raise InterventionError(
            f"{loaded.id} cannot be patched by this view: it reads decoders (the built-in GPT, Hugging Face causal "
            "LMs whose blocks it finds), recurrent language models with an output layer, and recurrent classifiers "
            "and taggers.")
    return adapter, layout


def reads(adapter: Intervenes, tokens: Sequence[str]) -> tuple[str, bool]:
    """Where the metric is read for a prompt of `tokens` as shown, and whether the readout reads the top layer's
    state at the last position alone (a one-direction language model, last-state classifier or tagger)."""
    head, one_way = adapter.task_head, (layout := adapter.intervention_layout()) is not None and \
        layout.directions == ("fwd",)
    if head is None:
        return "after the last token", one_way
    if head.per_token:
        return f"of the label the tagger gives the prompt's last token, “{tokens[-1] if tokens else ''}”", one_way
    return (f"of the label the classifier gives the whole prompt (its head reads "
            f"{POOLING_WHAT.get(head.pooling, head.pooling)})", one_way and head.pooling == "last")


def _label(head: TaskHead, word: str, which: str) -> tuple[int, str, str]:
    """(index, name, "") of the label `word` names: its name (any case) or its index."""
    word, what = (word or "").strip(), "answer" if which == "answer" else "wrong"
    names = [label.casefold() for label in head.labels]
    shown = ", ".join(head.labels[:12]) + (", …" if len(head.labels) > 12 else "")
    if word.casefold() in names:
        i = names.index(word.casefold())
    elif word.isdigit() and int(word) < len(names):
        i = int(word)
    else:
        raise InterventionError((f"'{word[:40]}' is not one of the labels" if word else f"Type the {what} label")
                                + f": {shown}.")
    return i, head.labels[i], ""


def _encode(adapter: Intervenes, text: str, which: str) -> tuple[list[int], tuple[str, ...], tuple[str, ...]]:
    """(ids, tokens as shown, the tokenizer's notes) of a prompt as fed, without an end-of-text token a tokenizer
    appends to every text (the prompt goes on after its words). The prompt is read as typed but for whitespace at its
    end, which is left out (and said): the continuation word brings its own leading space."""
    typed = text or ""
    text = typed.rstrip()
    if not text:
        raise InterventionError(f"Type the {which} prompt.")
    enc = adapter.encode(text, max_tokens=MAX_TOKENS)  # longer: its first MAX_TOKENS tokens, and a note that says so
    if text != typed:
        tail = readable(typed[len(text):])
        enc = replace(enc, notes=(*enc.notes, f"The {which} prompt's trailing whitespace ({tail}) is left out: the "
                                  "continuation is read with its own leading space."))
    ids, tokens = list(enc.ids), enc.tokens
    while ids and ids[-1] in set(adapter.eos_ids) and enc.special[len(ids) - 1:len(ids)] == (True,):
        ids, tokens = ids[:-1], tokens[:-1]  # a tokenizer that ends every text: the prompt goes on after its words
    if not ids:
        said = " ".join(n for n in enc.notes if n != TYPE_A_SENTENCE)
        raise InterventionError(f"Type the {which} prompt" + (f": {said}" if said else ".") if enc.blank else
                                said or f"The {which} prompt gives no tokens.")
    return ids, tuple(tokens), tuple(enc.notes)


def continuation(adapter: Intervenes, text: str, word: str, which: str) -> tuple[int, str, str]:
    """(id, shown text, note) of `word` read as the next word after `text`: the first token that " " + `word` adds
    to the prompt's end as the tokenizer reads them together (note: "" or what was left out when the word is several
    tokens). The end is the prompt's last 200 characters: what a tokenizer adds there does not depend on the rest."""
    if adapter.task_head is not None:  # a classifier or tagger: the two continuations are two of its labels
        return _label(adapter.task_head, word, which)
    word = (word or "").strip()
    if not word:
        raise InterventionError(f"Type the {which} continuation.")
    tail = text.rstrip()[-200:]
    ends = set(adapter.eos_ids)

    def ids(s: str) -> list[int]:
        enc = adapter.encode(s, max_tokens=MAX_TOKENS + 64)
        return [i for i, sp in zip(enc.ids, enc.special or (False,) * len(enc.ids)) if not (sp and i in ends)]

    alone, joined = ids(tail), ids(tail + " " + word)
    n = next((i for i, (a, b) in enumerate(zip(alone, joined)) if a != b), min(len(alone), len(joined)))
    if n < len(alone) or n >= len(joined):
        raise InterventionError(f"'{word}' does not start a new token after the prompt for this tokenizer: pick "
                                "another word.")
    added = joined[n:]
    shown = adapter.sequence_strings(added)
    unknown = getattr(getattr(adapter, "vocab", None), "unk_id", None)
    if unknown is not None and added[0] == unknown:
        raise InterventionError(f"'{word}' is not in {adapter.id}'s vocabulary (it reads as {shown[0]}).")
    note = "" if len(added) == 1 else (f"The {which} '{word}' is {len(added)} tokens ({' '.join(shown)}): the metric "
                                       f"reads its first, {shown[0]}.")
    return int(added[0]), shown[0], note


def _metric(logits: torch.Tensor, answer: int, wrong: int) -> Metric:
    """logits (V,) -> the Metric."""
    p = torch.softmax(logits.double(), dim=-1)
    return Metric(float(logits[answer] - logits[wrong]), float(p[answer]), float(p[wrong]))


Shown = tuple[tuple[str, ...], tuple[str, ...], str, str]  # the prompts' tokens and the continuations as shown


def contrast(loaded: Loaded, text: str, corrupt: str, answer: str, wrong: str) -> Contrast:
    """The clean and corrupted prompts, the two continuations and both runs' metrics."""
    return contrast_of_ids(loaded, *_pair(_adapter(loaded)[0], text, corrupt, answer, wrong))


def _pair(adapter: Intervenes, text: str, corrupt: str, answer: str, wrong: str
          ) -> tuple[list[int], list[int], int, int, tuple[str, ...], Shown]:
    """The prompts' ids (T,) each, the two continuations' ids, the notes and what is shown: checked, not yet run."""
    ids, tokens, notes = _encode(adapter, text, "clean")
    cids, ctokens, cnotes = _encode(adapter, corrupt, "corrupted")
    if len(ids) != len(cids):
        raise InterventionError(
            f"The prompts must have the same number of tokens to patch position by position: the clean prompt has "
            f"{len(ids)} ({' '.join(tokens)}), the corrupted one {len(cids)} ({' '.join(ctokens)}). Change a word "
            "for one of the same length in tokens.")
    a, a_shown, a_note = continuation(adapter, text, answer, "answer")
    w, w_shown, w_note = continuation(adapter, text, wrong, "wrong continuation")
    if a == w:
        raise InterventionError(f"The answer and the wrong continuation start with the same token ({a_shown}).")
    notes = tuple(dict.fromkeys([*notes, *cnotes, *(n for n in (a_note, w_note) if n)]))
    return ids, cids, a, w, notes, (tokens, ctokens, a_shown, w_shown)


def contrast_of_ids(loaded: Loaded, ids: Sequence[int], corrupt_ids: Sequence[int], answer_id: int, wrong_id: int,
                    notes: tuple[str, ...] = (), shown: Shown | None = None) -> Contrast:
    """The Contrast of two token sequences of the same length (T,) and two next-token ids: both runs' metrics.
    shown: the prompts' tokens and the continuations as the page shows them (default: the ids shown as text)."""
    adapter, _ = _adapter(loaded)
    if len(ids) != len(corrupt_ids) or not len(ids):
        raise InterventionError("The prompts must have the same number of tokens, at least one.")
    with torch.inference_mode():
        runs = adapter.patched_logits(_batch(adapter, [ids, corrupt_ids]))
    clean, corrupted = (_metric(runs.logits[i], answer_id, wrong_id) for i in (0, 1))
    said = list(notes)
    if abs(clean.ld - corrupted.ld) < 1e-3:
        said.append(f"The clean and corrupted runs give the same logit difference ({clean.ld:.4f}): nothing can be "
                    "restored; pick prompts the model tells apart.")
    if shown is None:
        a, w = _names(adapter, [answer_id, wrong_id])
        shown = (tuple(adapter.sequence_strings(ids)), tuple(adapter.sequence_strings(corrupt_ids)), a, w)
    return Contrast(loaded.id, shown[0], shown[1], tuple(int(i) for i in ids), tuple(int(i) for i in corrupt_ids),
                    int(answer_id), int(wrong_id), shown[2], shown[3], clean, corrupted, tuple(said),
                    *reads(adapter, shown[0]))


def _names(adapter: Intervenes, ids: Sequence[int]) -> list[str]:
    """What the readout's indices `ids` are: tokens, or a task model's label names."""
    head = adapter.task_head
    return [head.labels[i] for i in ids] if head is not None else adapter.token_strings(list(ids))


def _batch(adapter: Intervenes, rows: Sequence[Sequence[int]]) -> torch.Tensor:
    return torch.tensor([list(r) for r in rows], dtype=torch.long, device=adapter.device)


# --------------------------------------------------------------------------------------------- patching grids
@dataclass(frozen=True)
class PatchGrid:
    """One grid of patched runs. values (R, K): the patched logit difference of each cell; restored (R, K) its
    restored fraction; rows: a label per layer (R = L, or L + 1 for the residual stream); cols: per position (its
    clean token) or per head (K = H); method "exact" or "attribution"; position: the one position the head grid
    patched (-1: every position); p_answer, p_wrong (R, K): the two continuations' probabilities in each patched run
    (exact patching; None for an estimate, which gives the logit difference only)."""

    kind: str
    direction: str
    method: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    values: np.ndarray
    restored: np.ndarray
    position: int = -1
    seconds: float = 0.0
    runs: int = 0
    check: float = 0.0  # |LD of the unpatched replay − LD of the base run| (the fast path's self-check)
    p_answer: np.ndarray | None = None
    p_wrong: np.ndarray | None = None

    def probabilities(self, row: int, col: int) -> tuple[float, float] | None:
        """(p(answer), p(wrong)) in one patched run (None: an estimate)."""
        if self.p_answer is None or self.p_wrong is None:
            return None
        return float(self.p_answer[row, col]), float(self.p_wrong[row, col])

    def strongest(self) -> tuple[int, int]:
        """(row, column) of the largest restored fraction, the residual stream after the last block left out (it
        holds only the last position's patch, always 1 when denoising)."""
        grid = self.restored[:-1] if self.kind == "resid" and len(self.restored) > 1 else self.restored
        if not np.isfinite(grid).any():
            return 0, 0
        i, j = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(grid), grid, -np.inf))), grid.shape)
        return int(i), int(j)


def _row_labels(layout: Layout, kind: str) -> tuple[str, ...]:
    if kind == "resid":
        return tuple(f"before layer {i}" for i in range(layout.n_layers)) + (f"after layer {layout.n_layers - 1}",)
    return tuple(f"layer {i}" for i in range(layout.n_layers))


def _kind(layout: Layout, kind: str, direction: str) -> None:
    """Checks a grid's kind ("" for none in particular) and direction against the model."""
    if kind and kind not in layout.kinds:
        offered = ", ".join(KINDS[k] for k in layout.kinds)
        raise InterventionError(f"This model has no {KINDS.get(kind, kind)} to patch here; it offers: {offered}.")
    if direction not in ("denoise", "noise"):
        raise InterventionError("direction must be denoise or noise.")


def _one_hot(K: int, T: int, positions: Sequence[int]) -> torch.Tensor:
    """(K, T, 1) bool: row k true at positions[k] (-1: every position)."""
    mask = torch.zeros(K, T, dtype=torch.bool)
    for k, p in enumerate(positions):
        if p < 0:
            mask[k] = True
        else:
            mask[k, p] = True
    return mask.view(K, T, 1)


def patching(loaded: Loaded, text: str, corrupt: str, answer: str, wrong: str, kind: str = "resid",
             direction: str = "denoise", position: int = -1, dir_: str = "fwd",
             progress: Progress | None = None) -> PatchGrid:
    """Exact activation patching of `kind` (KINDS) over layer × position (heads: layer × head, at `position` or every
    position): every cell one patched run, batched by layer. Decoders resume each layer's batch from that layer
    (the blocks before it are the base run's); recurrent networks run whole. dir_: the recurrent direction."""
    start = time.perf_counter()
    _kind(_adapter(loaded)[1], kind, direction)
    return patch_grid(loaded, contrast(loaded, text, corrupt, answer, wrong), kind, direction, position, dir_,
                      progress, start)


def patch_grid(loaded: Loaded, c: Contrast, kind: str = "resid", direction: str = "denoise", position: int = -1,
               dir_: str = "fwd", progress: Progress | None = None, start: float | None = None) -> PatchGrid:
    """`patching` of a Contrast already made (e.g. from token ids, contrast_of_ids)."""
    start = time.perf_counter() if start is None else start
    adapter, layout = _adapter(loaded)
    _kind(layout, kind, direction)
    base_ids, src_ids = (c.corrupt_ids, c.ids) if direction == "denoise" else (c.ids, c.corrupt_ids)
    T = len(base_ids)
    if kind == "heads" and not -1 <= position < T:
        raise InterventionError(f"position must be -1 (every position) or 0..{T - 1}.")
    R = layout.rows(kind)
    names = [layout.site(kind, r, dir_) for r in range(R)]
    resumes = kind != "h" and kind != "c"
    K = layout.n_heads if kind == "heads" else T
    budget.check(price(budget.shape_of(loaded.model), T, R, K, resumes),
                 f"Patching every cell of the {KINDS[kind]} ({R} × {K} runs of {T} tokens)",
                 "Shorten the prompts, or choose attribution patching (two passes for every grid).")
    keep = names + ([layout.site("resid", r) for r in range(R if kind == "resid" else layout.n_layers)]
                    if resumes else [])
    with torch.inference_mode():
        src = adapter.patched_logits(_batch(adapter, [src_ids]), keep=names)
        base = adapter.patched_logits(_batch(adapter, [base_ids]), keep=keep, calls=resumes)
        base_ld = float(base.logits[0, c.answer_id] - base.logits[0, c.wrong_id])
        check = _resume_check(adapter, layout, base, base_ld, c) if resumes else 0.0
        fast = resumes and check <= 1e-3 * max(1.0, abs(base_ld))
        values, p_answer, p_wrong = np.zeros((R, K)), np.zeros((R, K)), np.zeros((R, K))
        runs = 0
        cols = tuple(f"head {h}" for h in range(layout.n_heads)) if kind == "heads" else c.tokens
        for r in range(R):
            if progress is not None:  # the grid so far: rows 0 … r − 1 exact, the others NaN
                done = np.where(np.arange(R)[:, None] < r, values, np.nan)
                _report(progress, r / R, f"{_row_labels(layout, kind)[r]}: {K} patched runs",
                         PatchGrid(kind, direction, "exact", _row_labels(layout, kind), cols, done, c.restored(done),
                                   position if kind == "heads" else -1, time.perf_counter() - start, runs, check))
            value = src.kept[names[r]]
            per = max(1, BATCH_TOKENS // T)
            for k0 in range(0, K, per):
                ks = list(range(k0, min(K, k0 + per)))
                mask = _head_mask(len(ks), T, layout.n_heads, ks, position) if kind == "heads" else \
                    _one_hot(len(ks), T, ks)
                patch = Patch(names[r], torch.arange(len(ks)), mask, value.expand(len(ks), *value.shape[1:]))
                logits = None
                if fast:
                    hidden = base.kept[layout.site("resid", r)]  # what enters block r (row L: after the last)
                    try:
                        logits = adapter.resume_logits(r, hidden.expand(len(ks), *hidden.shape[1:]), [patch],
                                                       base.calls or {})
                    except RESUME_FAILS:  # this batch's shape is not one the replay can broadcast: whole runs
                        fast, check = False, float("inf")
                if logits is None:
                    logits = adapter.patched_logits(_batch(adapter, [base_ids] * len(ks)), [patch]).logits
                values[r, ks] = (logits[:, c.answer_id] - logits[:, c.wrong_id]).double().cpu().numpy()
                probs = torch.softmax(logits.double(), dim=-1)
                p_answer[r, ks] = probs[:, c.answer_id].cpu().numpy()
                p_wrong[r, ks] = probs[:, c.wrong_id].cpu().numpy()
                runs += len(ks)
    if progress is not None:
        progress(1.0, "done")
    return PatchGrid(kind, direction, "exact", _row_labels(layout, kind), cols, values, c.restored(values),
                     position if kind == "heads" else -1, time.perf_counter() - start, runs, check, p_answer, p_wrong)


def price(shape: budget.Shape, tokens: int, rows: int, cols: int, resumes: bool) -> budget.Price:
    """The price of a grid of rows × cols patched runs of `tokens` tokens, in batches of BATCH_TOKENS tokens: a
    decoder resumes row r's runs at its layer (on average (L + 1) / 2L of the model), a recurrent network runs
    whole; and the two base runs. Its rows fill in as they are computed: a streamed price."""
    layers = max(shape.layers, 1)
    share = (layers + 1) / (2 * layers) if resumes else 1.0
    per = max(1, BATCH_TOKENS // max(tokens, 1))
    runs = budget.forward(shape, tokens, rows=max(1, round(rows * cols * share)) + 2,
                          calls=rows * -(-cols // per) + 2)
    peak = budget.forward(shape, tokens, rows=min(per, cols)).bytes
    return budget.Price(runs.seconds, peak, streamed=True, device=shape.device)


def _report(progress: Progress, *args: object) -> None:
    """progress(*args) out of inference mode: what it draws may need gradients (attribution patching's estimate)."""
    with torch.inference_mode(False), torch.enable_grad():
        progress(*args)


def rows_done(grid: PatchGrid) -> int:
    """How many rows (from the first) of a grid handed over while it is computed are exact."""
    return int(np.isfinite(grid.values).all(1).sum())


def fill_in(so_far: PatchGrid, estimate: PatchGrid) -> PatchGrid:
    """The grid `so_far` (exact rows, NaN where not computed yet) with `estimate`'s cells (attribution patching of
    the same site, direction and position) where it has none; method "exact so far"."""
    missing = ~np.isfinite(so_far.values)
    return replace(so_far, method="exact so far", values=np.where(missing, estimate.values, so_far.values),
                   restored=np.where(missing, estimate.restored, so_far.restored))


def _head_mask(K: int, T: int, H: int, heads: Sequence[int], position: int) -> torch.Tensor:
    """(K, T, H, 1) bool: row k true for head heads[k] at `position` (-1: every position)."""
    mask = torch.zeros(K, T, H, 1, dtype=torch.bool)
    for k, h in enumerate(heads):
        if position < 0:
            mask[k, :, h] = True
        else:
            mask[k, position, h] = True
    return mask


RESUME_FAILS = (TypeError, RuntimeError, KeyError, ValueError, IndexError, NotImplementedError, Unsupported)


def _resume_check(adapter: Intervenes, layout: Layout, base: PatchedRun, base_ld: float, c: Contrast) -> float:
    """max |LD of the base run replayed from block 0, in a batch of two − its LD|: the fast path (resuming at a block
    with the block calls' arguments of one run, broadcast over a batch) is used only when the replay gives the model's
    own numbers (inf: the replay failed, e.g. a family whose blocks read a per-row tensor such as BLOOM's ALiBi)."""
    hidden = base.kept[layout.site("resid", 0)]
    try:
        logits = adapter.resume_logits(0, hidden.expand(2, *hidden.shape[1:]), (), base.calls or {})
    except RESUME_FAILS:
        return float("inf")
    return float((logits[:, c.answer_id] - logits[:, c.wrong_id] - base_ld).abs().max())


# --------------------------------------------------------------------------------------------- attribution
def _sites(layout: Layout, dir_: str) -> dict[str, list[str]]:
    """kind -> the record name of each grid row, for every kind the model offers."""
    return {k: [layout.site(k, r, dir_) for r in range(layout.rows(k))] for k in layout.kinds}


def attribution(loaded: Loaded, text: str, corrupt: str, answer: str, wrong: str, direction: str = "denoise",
                position: int = -1, dir_: str = "fwd") -> dict[str, PatchGrid]:
    """Attribution patching of every kind at once: kind -> PatchGrid (method "attribution") with the first-order
    estimate LD_base + (a_source − a_base) · ∂LD/∂a(base) of each cell's patched logit difference."""
    start = time.perf_counter()
    _kind(_adapter(loaded)[1], "", direction)
    return attribution_grids(loaded, contrast(loaded, text, corrupt, answer, wrong), direction, position, dir_,
                             start)


def attribution_grids(loaded: Loaded, c: Contrast, direction: str = "denoise", position: int = -1,
                      dir_: str = "fwd", start: float | None = None) -> dict[str, PatchGrid]:
    """`attribution` of a Contrast already made."""
    start = time.perf_counter() if start is None else start
    adapter, layout = _adapter(loaded)
    _kind(layout, "", direction)
    base_ids, src_ids = (c.corrupt_ids, c.ids) if direction == "denoise" else (c.ids, c.corrupt_ids)
    T = len(base_ids)
    if not -1 <= position < T:
        raise InterventionError(f"position must be -1 (every position) or 0..{T - 1}.")
    sites = _sites(layout, dir_)
    names = sorted({n for rows in sites.values() for n in rows})

    def ld(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, c.answer_id] - logits[0, c.wrong_id]

    base_ld, base, grads = adapter.site_gradients(_batch(adapter, [base_ids]), names, ld)
    with torch.inference_mode():
        src = adapter.patched_logits(_batch(adapter, [src_ids]), keep=names).kept
    seconds = time.perf_counter() - start
    out = {}
    for kind, rows in sites.items():
        est = []
        for name in rows:
            delta = (src[name][0].double() - base[name].double()) * grads[name].double()   # (T, ...)
            if kind == "heads":
                per = delta.sum(dim=-1)                                                      # (T, H)
                est.append((per.sum(dim=0) if position < 0 else per[position]).cpu().numpy())
            else:
                est.append(delta.reshape(T, -1).sum(dim=-1).cpu().numpy())
        values = float(base_ld) + np.stack(est)
        cols = tuple(f"head {h}" for h in range(layout.n_heads)) if kind == "heads" else c.tokens
        out[kind] = PatchGrid(kind, direction, "attribution", _row_labels(layout, kind), cols, values,
                              c.restored(values), position if kind == "heads" else -1, seconds, 2)
    return out


@dataclass(frozen=True)
class Agreement:
    """How well attribution patching estimates exact patching on one grid: Pearson r over the cells of the restored
    fractions, and the cell where they differ most (its row and column labels and both values)."""

    r: float
    worst_row: str
    worst_col: str
    exact: float
    estimate: float

    @property
    def gap(self) -> float:
        return abs(self.exact - self.estimate)


def agreement(exact: PatchGrid, estimate: PatchGrid) -> Agreement:
    a, b = exact.restored.ravel(), estimate.restored.ravel()
    finite = np.isfinite(a) & np.isfinite(b)
    r = float(np.corrcoef(a[finite], b[finite])[0, 1]) if finite.sum() > 1 and a[finite].std() > 0 and \
        b[finite].std() > 0 else float("nan")
    gaps = np.where(finite, np.abs(a - b), -1.0)
    i, j = np.unravel_index(int(np.argmax(gaps)), exact.restored.shape)
    return Agreement(r, exact.rows[i], exact.cols[j], float(exact.restored[i, j]), float(estimate.restored[i, j]))


@dataclass(frozen=True)
class FirstPatches:
    """What the view's first "what to notice" point says about a pair: `differ` the positions where the two prompts'
    tokens differ and `tokens` the clean tokens there; from an exact denoising grid (None: not given) of the row the
    point reads (a decoder's residual stream before layer 0; a recurrent model's h of its top layer): `at_differ` the
    restored fraction at each differing position (recurrent: at each position from the first difference on, the last
    included), `at_agree` the largest |restored| where the runs are the same (a decoder: where the tokens agree; a
    recurrent model: before the first difference; 0.0 when there is no such position), `last` at the last position;
    `last_state` and `reads` the Contrast's (what the readout reads), `best` the row's largest restored fraction and
    `best_at` its clean token."""

    differ: tuple[int, ...]
    tokens: tuple[str, ...]
    at_differ: tuple[float, ...] | None = None
    at_agree: float | None = None
    last: float | None = None
    last_state: bool = True
    reads: str = ""
    best: float = 0.0
    best_at: str = ""


def first_patches(c: Contrast, grid: PatchGrid | None = None) -> FirstPatches:
    """FirstPatches of a contrast; `grid` an exact denoising grid of the residual stream (its first row is read) or of
    h (its last row, the top layer, is read), else None."""
    differ = tuple(int(t) for t in np.flatnonzero(c.differs))
    tokens = tuple(c.tokens[t] for t in differ)
    if grid is None or grid.method != "exact" or grid.direction != "denoise" or grid.kind not in ("resid", "h") \
            or not differ:
        return FirstPatches(differ, tokens)
    row = grid.restored[0] if grid.kind == "resid" else grid.restored[-1]
    same = np.ones(len(row), dtype=bool)
    if grid.kind == "resid":
        same[list(differ)] = False
        at = row[list(differ)]
    else:  # the recurrence carries a difference on: the runs are the same only before the first one
        same[differ[0]:] = False
        at = row[differ[0]:]
    agree = float(np.abs(row[same]).max()) if same.any() else 0.0
    best = int(np.nanargmax(row)) if np.isfinite(row).any() else len(row) - 1
    return FirstPatches(differ, tokens, tuple(float(v) for v in at), agree, float(row[-1]), c.last_state, c.reads,
                        float(row[best]), c.tokens[best])


# --------------------------------------------------------------------------------------------- ablation
SITE_KIND = {"head": "heads", "mlp": "mlp", "attn": "attn", "unit": "h"}  # a Component's kind -> its Layout site kind


@dataclass(frozen=True)
class Component:
    """One thing to ablate: a head (layer, head), an MLP or attention layer's output, or a recurrent unit."""

    kind: str  # "head" | "mlp" | "attn" | "unit"
    layer: int
    index: int = -1

    @property
    def label(self) -> str:
        return {"head": f"layer {self.layer} head {self.index}", "mlp": f"layer {self.layer} MLP",
                "attn": f"layer {self.layer} attention", "unit": f"layer {self.layer} unit {self.index}"}[self.kind]



def _units(adapter: Intervenes) -> int:
    return int(getattr(getattr(adapter, "weights", None), "hidden_size", 0) or 0)


def components(loaded: Loaded) -> list[str]:
    """Every component code the model offers to ablate: heads, then MLP and attention layers, or recurrent units."""
    adapter, layout = _adapter(loaded)
    units = _units(adapter)
    out = []
    for layer in range(layout.n_layers):
        if "heads" in layout.kinds:
            out += [f"L{layer}H{h}" for h in range(layout.n_heads)]
        out += [f"L{layer}{k.upper()}" for k in ("mlp", "attn") if k in layout.kinds]
        if "h" in layout.kinds:
            out += [f"L{layer}U{u}" for u in range(units)]
    return out


_CODE = re.compile(r"L(\d{1,4})(?:H(\d{1,4})|(MLP)|(ATTN)|U(\d{1,6}))")  # L3H2, L3MLP, L3ATTN, L0U12


def _component(m: re.Match[str]) -> Component:
    """The Component a _CODE match names (not yet checked against a model)."""
    head, mlp, attn, unit = m.group(2), m.group(3), m.group(4), m.group(5)
    kind = "head" if head is not None else "mlp" if mlp else "attn" if attn else "unit"
    return Component(kind, int(m.group(1)), int(head if head is not None else unit if unit is not None else -1))


def component_label(code: str) -> str:
    """A code (L3H2, L3MLP, L3ATTN, L0U12) in words."""
    m = _CODE.fullmatch(code)
    return code if m is None else _component(m).label


def parse_components(codes: Sequence[str], layout: Layout, units: int = 0) -> tuple[Component, ...]:
    """URL codes (L3H2, L3MLP, L3ATTN, L0U12) -> Components, checked against the model; a bad code raises."""
    out = []
    for code in codes:
        m = _CODE.fullmatch(str(code).strip().upper())
        if m is None:
            raise InterventionError(f"'{str(code)[:20]}' is not a component: write L3H2 (a head), L3MLP, L3ATTN or "
                                    "L0U12 (a recurrent unit).")
        comp = _component(m)
        if comp.layer >= layout.n_layers:
            raise InterventionError(f"{code}: the model has layers 0..{layout.n_layers - 1}.")
        if comp.kind == "head":
            if "heads" not in layout.kinds or comp.index >= layout.n_heads:
                raise InterventionError(
                    f"{code}: the model has {layout.n_heads} heads per layer (0..{layout.n_heads - 1})"
                    if "heads" in layout.kinds else f"{code}: this model has no heads to ablate.")
        elif comp.kind in ("mlp", "attn"):
            if comp.kind not in layout.kinds:
                raise InterventionError(f"{code}: this model has no {KINDS[comp.kind]} to ablate.")
        else:
            if "h" not in layout.kinds or comp.index >= units:
                raise InterventionError(f"{code}: the model has units 0..{units - 1} per layer." if "h" in layout.kinds
                                        else f"{code}: only recurrent models have units to ablate here.")
        out.append(comp)
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Ablation:
    """The next-token distribution after the clean prompt before and after the ablation: the top k of each
    (tokens, probabilities), the probability after of the top token before, and the metric before and after when
    the prompts define one (else None)."""

    components: tuple[str, ...]
    how: str
    before_tokens: tuple[str, ...]
    before_probs: np.ndarray
    after_tokens: tuple[str, ...]
    after_probs: np.ndarray
    top_after: float
    before: Metric | None = None
    after: Metric | None = None
    notes: tuple[str, ...] = ()
    outputs: str = "next tokens after the clean prompt"  # what the bars are (a task model: its labels)


def _top(p: torch.Tensor, k: int, unknown: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the k most probable entries of p (V,), `unknown` left out of the ranking."""
    indices = torch.topk(without_unknown(p, unknown), min(k, len(p) - (unknown is not None))).indices
    return p[indices], indices


def ablation(loaded: Loaded, text: str, codes: tuple[str, ...], how: str = "zero", corrupt: str = "",
             answer: str = "", wrong: str = "", k: int = 10) -> Ablation:
    """Ablate the components `codes` (parse_components) in the run of `text`: "zero" (their output set to 0), "mean"
    (to its mean over the positions of the prompt, and of the corrupted one when given), "resample" (to its value
    in the corrupted prompt, same length). Recurrent units: the unit's h at every step."""
    adapter, layout = _adapter(loaded)
    if how not in ABLATIONS:
        raise InterventionError(f"Ablation must be one of {', '.join(ABLATIONS)}.")
    comps = parse_components(codes, layout, _units(adapter))
    ids, _, notes = _encode(adapter, text, "clean")
    refs = [ids]
    ends: tuple[int, int] | None
    try:  # the continuations' ids (the metric's), read without running the model: the runs below are the ones shown
        ends = _pair(adapter, text, corrupt, answer, wrong)[2:4]
    except InterventionError:  # no corrupted prompt or continuations: no metric, the next tokens only
        ends = None
    if how == "resample" or (how == "mean" and corrupt.strip()):
        cids, _, _ = _encode(adapter, corrupt, "corrupted")
        if len(cids) != len(ids):
            if how == "resample":
                raise InterventionError("Resampling takes each activation from the corrupted prompt at the same "
                                        "position: the two prompts need the same number of tokens.")
        else:
            refs.append(cids)
    if how == "resample" and len(refs) < 2:
        raise InterventionError("Type a corrupted prompt to resample the activations from.")
    T = len(ids)
    site_of = {x: layout.site(SITE_KIND[x.kind], x.layer) for x in comps}
    sites = sorted(set(site_of.values()))
    with torch.inference_mode():
        ref = adapter.patched_logits(_batch(adapter, refs), keep=sites)
        patches = []
        for comp in comps:
            site = site_of[comp]
            acts = ref.kept[site]                                                  # (R, T, ...)
            if how == "zero":
                value = torch.zeros_like(acts[:1])
            elif how == "mean":
                value = acts.mean(dim=(0, 1), keepdim=True).expand(1, T, *acts.shape[2:])
            else:
                value = acts[1:2]
            mask = torch.zeros(1, T, *acts.shape[2:], dtype=torch.bool)
            if comp.index >= 0:  # a head (T, H, d) or a unit (T, H)
                mask[:, :, comp.index] = True
            else:  # a layer's whole output
                mask[:] = True
            patches.append(Patch(site, torch.tensor([0]), mask, value))
        before = ref.logits[0]
        after = adapter.patched_logits(_batch(adapter, [ids]), patches).logits[0]
    pb, pa = torch.softmax(before.double(), -1), torch.softmax(after.double(), -1)
    unknown = unknown_word_id(adapter) if adapter.task_head is None else None  # <unk> is not a word: not ranked
    top_b, top_a = (_top(p, k, unknown) for p in (pb, pa))
    notes = (*notes, *(["Mean ablation: each component's output is replaced by its mean over the positions of the "
                         "prompt" + (" and of the corrupted prompt" if len(refs) > 1 else "") + "."]
                       if how == "mean" and comps else []),
             *(["A unit is one of the forward direction's hidden units: the backward direction's are left as they "
                "are."] if len(layout.directions) > 1 and any(x.kind == "unit" for x in comps) else []))
    head = adapter.task_head
    return Ablation(tuple(x.label for x in comps), how, tuple(_names(adapter, top_b[1].tolist())),
                    top_b[0].numpy(), tuple(_names(adapter, top_a[1].tolist())), top_a[0].numpy(),
                    float(pa[int(top_b[1][0])]),
                    _metric(before, *ends) if ends else None,
                    _metric(after, *ends) if ends else None, tuple(dict.fromkeys(notes)),
                    "next tokens after the clean prompt" if head is None else
                    "labels of the clean prompt" + ("'s last token" if head.per_token else ""))
