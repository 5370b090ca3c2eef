"""Decoding strategies side by side: one prompt, one seed, several strategies through the one generation loop
(explorer.adapters.generation), with the model's own log-probability of every generated token (temperature 1, no
processor: the model's distribution, whatever the strategy sampled from), metrics, and one step's distribution.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

import numpy as np
import torch

from explorer.adapters import generation as G
from explorer.metrics import text as MT
from explorer.adapters.base import Unsupported
from explorer.adapters.task_head import not_a_language_model
from explorer.adapters.protocols import Generates, Loaded, Reads
from explorer.adapters.text import TYPE_A_SENTENCE, shown_text, unknown_word_id
from explorer.runtime import budget
from explorer.runtime.device import is_large
from explorer.runtime import model_state
from explorer.adapters.generation import LABELS, SAMPLING, BeamTrace, DecodingError, Strategy
from explorer.views import BY_PATH, KINDS, MAX_NEW, MAX_SAMPLES

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import Tokenizer

BEAM_BUDGET = 800  # num_beams × new tokens: beyond this, the beam column generates fewer tokens
SAMPLE_BUDGET = 4000  # n samples × new tokens per strategy
TOP = 20
MAX_SYSTEM = 1000  # characters of a system prompt (the view's URL parameter `system`)
# A model with more parameters than explorer.runtime.device.LARGE_MODEL opens the view with fewer new tokens and samples
# (first_open): on one CPU thread SmolLM2-135M takes ~11 s for the view's defaults (4 strategies, 30 tokens,
# 5 samples), ~7.7 s with these.
LARGE_DEFAULTS = {"max_new": 20, "n": 3}
PROMPT_STATES = 2  # prompts whose state after reading them each model keeps (read_prompt)
PROMPT_KEPT = 64  # the prompt tokens a cut to the budget keeps at least, before it generates fewer new tokens


@dataclass(frozen=True)
class Output:
    """One generated continuation: ids (generated only, the end token included), their strings, and the model's
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
    unknown_max: float | None = None  # <unk> left out: the largest probability the model gave it (None: not left out)

    def summary(self) -> dict[str, Any]:
        """Metrics over the n outputs: means of per-output metrics, self-BLEU, corpus distinct-n."""
        all_lp = np.concatenate([o.logprobs for o in self.outputs]) if self.outputs else np.zeros(0)
        seqs = [o.ids for o in self.outputs]
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
            "deterministic": not self.strategy.do_sample,
        }


@dataclass(frozen=True)
class Prompt:
    model_input: tuple[int, ...]  # what adapter.start reads (decoder prompt, or encoder source)
    start: tuple[int, ...]  # the decoder sequence the processors see
    tokens: tuple[str, ...]
    notes: tuple[str, ...]
    max_new: int
    special: tuple[bool, ...] = ()  # True where the token is one of the tokenizer's special tokens
    system: str | None = None  # chat: the system prompt the model read (None: no system turn)
    start_note: str = ""  # empty prompt: the token generation starts from, by name, and what it is


@dataclass(frozen=True)
class ChatTemplate:
    """What a tokenizer's chat template does, read from its own output (nothing is hard-coded per model).

    default_system: the system prompt the template adds when none is given (None: it adds none); system_ok: whether
    it accepts a system message; opener: the special token that opens each turn (e.g. <|im_start|>), shown as text,
    "" when the turns are not opened by one special token; end: the model's end-of-sequence tokens as text (where a
    turn, and generation, ends)."""

    default_system: str | None
    system_ok: bool
    opener: str
    end: tuple[str, ...]


@dataclass(frozen=True)
class DecodingRun:
    """Everything the page shows: the prompt as read (wrapped in the chat template when `chat`), one Generation per
    strategy, notes. prompt_text: the text the columns continue (chat: the user's message, which they answer; an
    encoder-decoder: the source they translate)."""

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
    chat: bool = False
    system: str | None = None  # chat: the system prompt the model read (None: none)
    prompt_special: tuple[bool, ...] = ()
    start_note: str = ""  # empty prompt: which token generation starts from, and what it is


def generator(loaded: Loaded) -> Generates:
    """The model's adapter if it can generate; DecodingError with the reason otherwise."""
    if (adapter := loaded.caps.stepper) is None and (task := not_a_language_model(loaded, "generates no text")):
        raise DecodingError(task)
    if adapter is None:
        raise DecodingError(loaded.adapter.reason or f"{loaded.id} ({getattr(loaded, 'family', '?')}) has no "
                            "language-model head that predicts the next token: pick a causal LM (built-in tiny-gpt / "
                            "RNN LMs, GPT-2 family) or an encoder-decoder.")
    return adapter


# ------------------------------------------------------------------------------------------- chat template
_MARK_SYSTEM, _MARK_USER = "\u2063SYSTEM\u2063", "\u2063USER\u2063"  # invisible separators: in no template


def _tokenizer(adapter: Reads) -> Tokenizer | None:
    """The Hugging Face tokenizer of the adapter (explorer.adapters.hf), or None (the built-in models)."""
    tokenizer: Tokenizer | None = getattr(adapter, "tokenizer", None)
    return tokenizer


def _render(tokenizer: Tokenizer, user: str, system: str | None) -> str:
    messages = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": user}]
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def chat_template(loaded: Loaded) -> ChatTemplate | None:
    """The chat template of a decoder's tokenizer, read from what it renders, or None when it has none (or cannot
    render a user turn)."""
    return _template(stepper) if (stepper := loaded.caps.stepper) is not None else None


def _template(adapter: Generates) -> ChatTemplate | None:
    tok = _tokenizer(adapter)
    if tok is None or adapter.is_encoder_decoder or not adapter.can_generate or not getattr(tok, "chat_template", None):
        return None
    try:
        plain = _render(tok, _MARK_USER, None)
    except Exception:  # a template that raises on a lone user turn (jinja errors of all kinds)
        return None
    try:
        with_system = _render(tok, _MARK_USER, _MARK_SYSTEM)
        system_ok = _MARK_SYSTEM in with_system
    except Exception:  # e.g. templates that refuse the system role
        with_system, system_ok = "", False
    default = None
    if system_ok:  # the text the template puts where a given system prompt would go, when none is given
        before, after = with_system.split(_MARK_SYSTEM, 1)
        if plain.startswith(before) and plain.endswith(after) and len(plain) > len(before) + len(after):
            default = plain[len(before):len(plain) - len(after)]
    opener = ""
    if adapter.bos_id is not None:  # the BOS token opens the first turn and the next ones (SmolLM2's <|im_start|>)
        bos, ids = int(adapter.bos_id), _chat_ids(tok, plain)
        if ids[:1] == [bos] and ids.count(bos) >= 2:
            opener = adapter.token_strings([bos])[0]
    return ChatTemplate(default, system_ok, opener, tuple(adapter.token_strings(list(adapter.eos_ids))))


def _chat_ids(tokenizer: Tokenizer, rendered: str) -> list[int]:
    """The ids of a rendered chat, as apply_chat_template(tokenize=True) gives them (no special tokens added)."""
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def chat_ids(adapter: Generates, text: str, system: str = "") -> tuple[list[int], str | None]:
    """The ids of `text` as a user turn in the model's chat template (system prompt `system`, or the template's
    default when empty), with the assistant's turn opened, as the tokenizer's apply_chat_template gives them; and
    the system prompt the model reads (None: none)."""
    info = _template(adapter)
    if info is None:
        raise DecodingError(f"{adapter.id}'s tokenizer has no chat template: the prompt is read as raw text.")
    tok = _tokenizer(adapter)
    assert tok is not None  # _template read the chat template from it
    given = system if system and info.system_ok else None
    encoded = tok.apply_chat_template([*([{"role": "system", "content": given}] if given is not None else []),
                                       {"role": "user", "content": text}], tokenize=True, add_generation_prompt=True,
                                      return_dict=True)
    assert isinstance(encoded, Mapping)  # return_dict: a BatchEncoding
    ids = encoded["input_ids"]
    return [int(i) for i in ids], (given if given is not None else info.default_system)


def start_token_note(adapter: Generates, bos: int, template: ChatTemplate | None) -> str:
    """What an empty prompt starts from: the beginning-of-sequence token `bos` by name (as shown text) and what it
    is."""
    name = adapter.token_strings([bos])[0]
    whose = "the tokenizer's" if _tokenizer(adapter) is not None else "the model's"
    start = f"Empty prompt: generation starts from the beginning-of-sequence token alone, {name} ({whose})"
    if template is not None and template.opener == name:
        return (f"{start}, which this chat model uses to open a turn: its chat template writes {name} before every "
                "message, so the model continues as if a new turn began.")
    return f"{start}, the token that starts every text it was trained on."


def prepare_prompt(adapter: Generates, text: str, max_new: int, chat: bool = False, system: str = "") -> Prompt:
    """Encode the prompt as the model reads it; empty -> the start token; longer than the context -> its end.
    chat: `text` as a user turn in the tokenizer's chat template (system prompt `system`, empty = the template's
    default), the assistant's turn opened: generation is the model's reply, ending at its end-of-turn token.
    The prompt is read as typed: nothing (or nothing its tokenizer keeps) starts from the start token."""
    if chat:
        return _chat_prompt(adapter, text, max_new, system)
    notes: list[str] = []
    start_note = ""
    enc = adapter.encode(text)
    if not enc.ids and not enc.blank:
        raise DecodingError(" ".join(enc.notes) or f"The tokenizer of {adapter.id} gives no tokens for this text.")
    ids, tokens = list(enc.ids), list(enc.tokens)
    notes.extend(n for n in enc.notes if n != TYPE_A_SENTENCE)
    if not ids:
        if adapter.is_encoder_decoder:
            ids = list(adapter.eos_ids[:1])
            notes.append("Empty prompt: the encoder reads only the end-of-sequence token.")
        else:
            if adapter.bos_id is None:
                raise DecodingError(f"The prompt is empty and {adapter.id} has no beginning-of-sequence token to start "
                                    "from: type a few words.")
            ids = [adapter.bos_id]
            start_note = start_token_note(adapter, adapter.bos_id, _template(adapter))
            notes.append(start_note)
    room_for = adapter.context_len
    if room_for is not None and not adapter.sliding:
        if max_new >= room_for:
            notes.append(f"{max_new} new tokens do not fit in the model's {room_for} positions: generating "
                         f"{room_for - 1}.")
            max_new = room_for - 1
        room = room_for - max_new
        if len(ids) > room:
            notes.append(f"The prompt has {len(ids):,} tokens; with {max_new} new ones only its last {room:,} fit in "
                         f"the model's {room_for} positions, so the start was cut.")
            ids, tokens = ids[-room:], tokens[-room:]
    elif adapter.sliding and room_for is not None and len(ids) + max_new > room_for:
        notes.append(f"Prompt + new tokens exceed the model's {room_for} positions: each step reads only the "
                     f"last {room_for} tokens (a sliding window, as nanoGPT's generate).")
    start = tuple(adapter.decoder_start) if adapter.is_encoder_decoder else tuple(ids)
    special = tuple(enc.special) if len(enc.special) == len(ids) and len(tokens) == len(ids) else ()
    if len(tokens) != len(ids):  # the start token of an empty prompt
        tokens = adapter.sequence_strings(ids)
        special = (True,) * len(ids)
    return Prompt(tuple(ids), start, tuple(tokens), tuple(notes), max_new, special, None, start_note)


def _chat_prompt(adapter: Generates, text: str, max_new: int, system: str) -> Prompt:
    """The message and system prompt as typed, in the chat template (a system prompt of only whitespace is none)."""
    notes: list[str] = []
    template = _template(adapter)
    if template is None:
        raise DecodingError(f"{adapter.id}'s tokenizer has no chat template: turn the chat template off to continue "
                            "the raw text.")
    text, system = text or "", system or ""
    if not system.strip():
        system = ""
    if len(system) > MAX_SYSTEM:
        notes.append(f"The system prompt has {len(system):,} characters; only its first {MAX_SYSTEM:,} are used.")
        system = system[:MAX_SYSTEM]
    if system and not template.system_ok:
        notes.append(f"{adapter.id}'s chat template takes no system message: the system prompt is left out.")
    if not text:
        notes.append("Empty message: the model reads an empty user turn and replies to it.")
    ids, used = chat_ids(adapter, text, system)
    room_for = adapter.context_len
    if room_for is not None:
        if max_new >= room_for:
            notes.append(f"{max_new} new tokens do not fit in the model's {room_for} positions: generating "
                         f"{room_for - 1}.")
            max_new = room_for - 1
        if len(ids) + max_new > room_for:
            raise DecodingError(f"The message in the chat template is {len(ids):,} tokens; with {max_new} new ones it "
                                f"does not fit in the model's {room_for:,} positions: shorten it.")
    tok = _tokenizer(adapter)
    specials = {int(i) for i in getattr(tok, "all_special_ids", ())}
    return Prompt(tuple(ids), tuple(ids), tuple(adapter.sequence_strings(ids)), tuple(notes), max_new,
                  tuple(i in specials for i in ids), used, "")


SENTENCE_ENDS = (".", "!", "?", "。")


def ends_sentence(text: str) -> str | None:
    """The sentence end a prompt finishes with ('.', '!', '?'), or None."""
    last = (text or "").rstrip()[-1:]
    return last if last in SENTENCE_ENDS else None


def end_hint(text: str, min_new: int = 0) -> str | None:
    """The hint for a decoder prompt that ends a sentence: the model may end the text at once."""
    end = ends_sentence(text)
    if end is None:
        return None
    unless = "" if min_new else " (or ask for at least a few new tokens)"
    return f"The prompt ends in '{end}': the model may stop at once: remove the final '{end}'{unless}."


@dataclass
class _Planned:
    """One strategy ready to run: its checked settings, its track (its rows in the batch), notes, new tokens."""

    strategy: Strategy
    track: G.Track
    notes: list[str]
    max_new: int


def _plan(adapter: Generates, prompt: Prompt, strategy: Strategy, seed: int, n: int = 1,
          stop_at_eos: bool = True) -> _Planned:
    """One strategy's rows: n sampled rows (within SAMPLE_BUDGET), one greedy row, or K beams (within BEAM_BUDGET)."""
    strategy, fixes = checked(strategy, adapter.vocab_size)
    notes = list(fixes)
    max_new = prompt.max_new
    start = torch.tensor([prompt.start], dtype=torch.long, device=adapter.device)
    if strategy.kind == "beam":
        if strategy.num_beams * max_new > BEAM_BUDGET:
            new = max(1, BEAM_BUDGET // strategy.num_beams)
            notes.append(f"Beam search: {strategy.num_beams} beams × {max_new} tokens is above the bound of "
                         f"{BEAM_BUDGET} beam-steps; this column generates {new} tokens.")
            max_new = new
        return _Planned(strategy, G.Beams(adapter, start, strategy, max_new, stop_at_eos), notes, max_new)
    n_run = _rows(strategy, n, max_new)
    if strategy.do_sample and n_run < min(int(n), MAX_SAMPLES):
        notes.append(f"{n} samples × {max_new} tokens is above the bound of {SAMPLE_BUDGET}: drawing {n_run} samples.")
    track = G.Sampling(adapter, start.repeat(n_run, 1), strategy, max_new, seed, stop_at_eos)
    return _Planned(strategy, track, notes, max_new)


def _rows(strategy: Strategy, n: int, max_new: int) -> int:
    """The rows `strategy` generates: K beams, 1 greedy row, or n samples (at most MAX_SAMPLES, and SAMPLE_BUDGET
    sampled tokens)."""
    if strategy.kind == "beam":
        return strategy.num_beams
    if not strategy.do_sample:
        return 1
    n_run = max(1, min(int(n), MAX_SAMPLES))
    return n_run if n_run * max_new <= SAMPLE_BUDGET else max(1, SAMPLE_BUDGET // max_new)


def within_budget(loaded: Loaded, prompt: Prompt, strategies: Sequence[Strategy], n: int, chat: bool) -> Prompt:
    """`prompt` made to fit the per-request budget (explorer.runtime.budget.generation), with a note: a long prompt's
    start is cut (its last PROMPT_KEPT tokens at least are kept; a chat message is not cut); when generating after
    those is still over the budget (many rows on a slow machine), each row generates fewer new tokens. Raises
    RequestOverBudget when not even one new token fits."""
    shape = budget.shape_of(loaded.model)
    has = len(prompt.model_input)
    settled = [checked(s, loaded.adapter.vocab_size)[0] for s in strategies]  # as _plan will run them

    def rows(new: int) -> int:
        return sum(_rows(s, n, new) for s in settled)

    def price(t: int, new: int = prompt.max_new) -> budget.Price:
        return budget.generation(shape, t, rows(new), new)

    if price(has).within():
        return prompt
    asked = f"generating {prompt.max_new} tokens for {rows(prompt.max_new)} rows after all of them would take " \
            f"{budget.describe(price(has))}, over {budget.limits(device=shape.device)}"
    keep = has if chat else min(has, PROMPT_KEPT)
    cap = has if chat else budget.fit_tokens(price, has)
    new = prompt.max_new
    if cap < keep or not price(cap).within():  # the generation itself is over: fewer new tokens after `keep`
        cap = keep
        new = int(budget.fit_tokens(lambda m: price(keep, m), prompt.max_new))
        if not price(keep, new).within():
            budget.check(price(has), f"Generating {prompt.max_new} tokens for {rows(prompt.max_new)} rows after this "
                                     f"{has:,}-token prompt",
                         "Shorten the prompt, or ask for fewer new tokens, samples or strategies.")
    said = []
    if cap < has:
        said.append(f"only its last {cap:,} are read")
    if new < prompt.max_new:
        said.append(f"each row generates {new} new tokens (fewer samples or strategies leave room for more)")
    note = f"The prompt has {has:,} tokens; {asked}: {' and '.join(said)}."
    ids = prompt.model_input[-cap:]
    start = prompt.start if loaded.adapter.is_encoder_decoder else ids
    special = prompt.special[-cap:] if len(prompt.special) == has else prompt.special
    tokens = prompt.tokens[-cap:] if len(prompt.tokens) == has else prompt.tokens
    return replace(prompt, model_input=ids, start=start, tokens=tokens, special=special, max_new=new,
                   notes=(*prompt.notes, note))


def _generation(adapter: Generates, plan: _Planned, seconds: float) -> Generation:
    if isinstance(plan.track, G.Beams):
        ids, lps, beam = plan.track.result()
        rows, row_lps = [ids], [lps]
    else:
        (rows, row_lps), beam = plan.track.result(), None
    outputs = tuple(Output(tuple(r), tuple(adapter.sequence_strings(r)), shown_text(adapter, r),
                           np.asarray(lp, dtype=np.float32)) for r, lp in zip(rows, row_lps))
    track = plan.track
    return Generation(plan.strategy, outputs, beam, tuple(plan.notes), seconds, plan.max_new,
                      track.unknown_max if track.unknown is not None else None)


def has_unknown_word(loaded: Loaded) -> bool:
    """Whether the model's vocabulary has an unknown-word token that generation leaves out unless asked."""
    return unknown_word_id(loaded.adapter) is not None


def unknown_note(loaded: Loaded, generations: Sequence[Generation]) -> str:
    """What the columns left out: the unknown-word token and the largest probability the model gave it in each
    ("" when none was left out)."""
    left = [(g, g.unknown_max) for g in generations if g.unknown_max is not None]
    adapter = loaded.adapter
    unknown = unknown_word_id(adapter)
    if not left or unknown is None:
        return ""
    token = adapter.token_strings([unknown])[0]
    each = ", ".join(f"{LABELS.get(g.strategy.kind, g.strategy.kind)} {p:.2f}" for g, p in left)
    return (f"{token} (any word outside the model's vocabulary) is left out of the generated text: it is not a word. "
            f"Its largest probability at any step, unknown word: {each}. Settings → Show the unknown-word token "
            "generates it too.")


Progress = Callable[..., None]  # progress(fraction, what, shown): shown = ((strategy label, text so far), ...)


def read_prompt(adapter: Generates, model_input: Sequence[int]) -> tuple[torch.Tensor, object]:
    """adapter.start's (logits (1, V), state) after reading the prompt `model_input`, as a copy (generation changes
    its state). Read once per prompt: the model keeps the PROMPT_STATES last ones, so the step view and a rerun with
    other settings do not read the prompt again (SmolLM2, a 462-token prompt: 2.4 s to read, 21 MB kept)."""
    def start() -> tuple[torch.Tensor, object]:
        with torch.inference_mode(False), torch.no_grad():  # normal tensors: the copies may be stepped anywhere
            logits, state, _ = adapter.start(torch.tensor([list(model_input)], dtype=torch.long,
                                                          device=adapter.device))
        return logits, state

    return copy.deepcopy(model_state.kept(adapter, "prompt states", tuple(int(i) for i in model_input), start,
                                          most=PROMPT_STATES))


def generate_all(adapter: Generates, prompt: Prompt, strategies: Sequence[Strategy], seed: int, n: int = 1,
                 stop_at_eos: bool = True, progress: Progress | None = None) -> tuple[Generation, ...]:
    """Every strategy on the prompt in one loop (explorer.adapters.generation.together): the prompt read once, then
    one forward per step for all rows of all strategies (greedy 1, each sampling strategy n, beam search K); each
    row's tokens equal its strategy's own model.generate with this seed. A Generation's seconds are the whole run's.
    progress: called at every step with the fraction done, what it is, and each strategy's text so far (its first
    sample, or its best running beam)."""
    t0 = time.perf_counter()
    plans = [_plan(adapter, prompt, s, seed, n, stop_at_eos) for s in strategies]
    x = torch.tensor([prompt.model_input], dtype=torch.long, device=adapter.device)
    longest = max((p.max_new for p in plans), default=1)

    def on_step(t: int) -> None:
        if progress is not None:
            shown = tuple((LABELS.get(p.strategy.kind, p.strategy.kind), shown_text(adapter, p.track.partial_ids()))
                          for p in plans)
            progress((t + 1) / longest, f"token {t + 1} of at most {longest}", shown)

    if plans:
        if progress is not None:  # a long prompt takes seconds to read: say so before the first token
            progress(0.0, f"reading the {len(prompt.model_input):,}-token prompt")
        G.together(adapter, x, [p.track for p in plans], on_step=on_step, read=read_prompt(adapter, prompt.model_input))
    seconds = time.perf_counter() - t0
    return tuple(_generation(adapter, p, seconds) for p in plans)


def generate(adapter: Generates, prompt: Prompt, strategy: Strategy, seed: int, n: int = 1,
             stop_at_eos: bool = True) -> Generation:
    """One strategy: n sampled rows, or the one output of a deterministic strategy."""
    return generate_all(adapter, prompt, (strategy,), seed, n, stop_at_eos)[0]


def decode_all(loaded: Loaded, text: str, strategies: tuple[Strategy, ...], seed: int = 0, max_new: int = 30,
               n: int = 1, stop_at_eos: bool = True, chat: bool = False, system: str = "",
               progress: Progress | None = None) -> DecodingRun:
    """The page's computation: every strategy on the same prompt and seed. chat: `text` as a user turn of the
    tokenizer's chat template (system prompt `system`, empty = the template's default). A prompt whose generation
    is priced over the per-request budget is cut at its start, or generates fewer new tokens (`within_budget`).
    progress: see generate_all (the page shows each strategy's text as it is generated). Raises DecodingError, or
    RequestOverBudget (not even one new token of every row fits in the budget)."""
    adapter = generator(loaded)
    max_new = int(max_new)
    notes: list[str] = []
    if not 1 <= max_new <= MAX_NEW:
        notes.append(f"{max_new} new tokens is outside 1…{MAX_NEW}; using {min(max(max_new, 1), MAX_NEW)}.")
        max_new = min(max(max_new, 1), MAX_NEW)
    prompt = within_budget(loaded, prepare_prompt(adapter, text, max_new, chat, system), strategies, n, chat)
    notes.extend(prompt.notes)
    hint = None if adapter.is_encoder_decoder or chat else \
        end_hint(text, max((s.min_new_tokens for s in strategies), default=0))
    if hint and _template(adapter) is not None:
        hint += " Or turn on Chat template: this instruct model then reads it as a user turn and replies."
    notes += [hint] if hint else []
    try:
        gens = generate_all(adapter, prompt, strategies, seed, n, stop_at_eos, progress)
    except Unsupported as exc:
        raise DecodingError(str(exc)) from None
    # what the columns continue, as text: an encoder-decoder's source as typed (its ids are the source vocabulary's,
    # which the adapter's decoding, the target's, would misread when the two differ)
    shown = text if chat or adapter.is_encoder_decoder else shown_text(adapter, list(prompt.model_input))
    return DecodingRun(str(loaded.id), prompt.model_input, prompt.tokens, shown, gens, tuple(notes), int(seed),
                       adapter.context_len, adapter.is_encoder_decoder, prompt.start, bool(chat), prompt.system,
                       prompt.special, prompt.start_note)


def reads_alike(other: Loaded, run: DecodingRun, run_b: DecodingRun, vocab_size: int) -> bool:
    """Whether a second model (`other`, whose run is `run_b`) read the prompt as the same tokens as the first and has
    a vocabulary of the first's size (`vocab_size`): its distribution at a step of the first's output can then be
    read after the same tokens and compared token by token."""
    return run_b.prompt_ids == run.prompt_ids and generator(other).vocab_size == vocab_size


def first_open(loaded: Loaded) -> dict[str, int]:
    """The view's defaults that depend on the model's size: fewer new tokens and samples for a model larger than
    explorer.runtime.device.LARGE_MODEL parameters (the work a first open does stays a few seconds on one CPU thread);
    {} otherwise."""
    return dict(LARGE_DEFAULTS) if is_large(getattr(loaded, "model", None)) else {}


# The strategy fields that the decoding view declares (explorer.views), and the kinds that use each.
FIELDS = {"temperature": ("temperature", SAMPLING), "top_k": ("k", ("top-k",)), "top_p": ("p", ("top-p",)),
          "typical_p": ("typical", ("typical",)), "min_p": ("minp", ("min-p",)), "num_beams": ("beam", ("beam",)),
          "length_penalty": ("lp", ("beam",)), "repetition_penalty": ("rep", KINDS),
          "no_repeat_ngram_size": ("ngram", KINDS), "min_new_tokens": ("min_new", KINDS)}


def checked(strategy: Strategy, vocab_size: int) -> tuple[Strategy, tuple[str, ...]]:
    """`strategy` with each setting it uses in the range the decoding view declares, and a message per change
    (a top-k not smaller than the vocabulary keeps every token: said, and k = vocabulary)."""
    if strategy.kind not in KINDS:
        raise DecodingError(f"Unknown strategy '{strategy.kind}': use one of {', '.join(KINDS)}.")
    params, label = BY_PATH["decoding-strategies"].params, LABELS[strategy.kind]
    notes: list[str] = []
    fixed: dict[str, Any] = {}  # Strategy field -> its value, the fields named at run time (FIELDS)
    if strategy.kind == "top-k" and strategy.top_k >= vocab_size:
        notes.append(f"Top-k: k = {strategy.top_k:,} is not smaller than the vocabulary ({vocab_size:,} tokens): "
                     "every token is kept, so this column is pure sampling.")
        fixed["top_k"] = vocab_size
    for name, (key, kinds) in FIELDS.items():
        if strategy.kind in kinds and name not in fixed:
            fixed[name], note = params[key].validate(getattr(strategy, name), name=f"{label}: {params[key].label}")
            notes += [note] if note else []
    return replace(strategy, **fixed), tuple(notes)


# ---------------------------------------------------------------------------------------- per step
@dataclass(frozen=True)
class StepView:
    """The next-token distribution at one generated position of one output.

    Every array is (TOP,), one entry per token shown: ids/tokens: the most probable tokens after the penalties,
    best first; logits: their penalised logits; raw_probs: the model's own softmax (T = 1, no penalty); probs:
    softmax(penalised logits / T) over the whole vocabulary; kept: True where the strategy's filters (at this T) keep
    the token; final: the distribution actually sampled from (kept tokens renormalised); chosen: the token generated
    at this step (rank in the whole vocabulary); context: the last tokens before it (an encoder-decoder's: the
    decoder's).
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
def step_view(loaded: Loaded, model_input: tuple[int, ...], start: tuple[int, ...], generated: tuple[int, ...],
              strategy: Strategy, step: int, temperature: float, top: int = TOP,
              ids: tuple[int, ...] | None = None) -> StepView:
    """The distribution before generated[step], with the strategy's processors and filters at `temperature`: the
    `top` most probable tokens, or the tokens `ids` (another model's top tokens, to compare the two)."""
    adapter = generator(loaded)
    strategy, _ = checked(strategy, adapter.vocab_size)
    if ids is not None and not all(0 <= int(i) < adapter.vocab_size for i in ids):
        raise DecodingError(f"{loaded.id} has {adapter.vocab_size:,} tokens: the tokens to compare are not all in it.")
    dev = adapter.device
    step = min(max(int(step), 0), max(len(generated) - 1, 0))
    prefix = list(generated[:step])
    logits, state = read_prompt(adapter, model_input)
    for t in prefix:
        logits, state, _ = adapter.step(state, torch.tensor([t], device=dev))
    seq = torch.tensor([list(start) + prefix], dtype=torch.long, device=dev)
    raw = torch.log_softmax(logits[0], dim=-1)
    base = G.processors(adapter, replace(strategy, temperature=1.0), len(start), 10**9, warpers=False)
    pen = base(cast(torch.LongTensor, seq), logits.clone())[0]
    T = float(temperature) if temperature and temperature > 0 else 1.0
    scaled = pen / T
    log_probs = torch.log_softmax(scaled, dim=-1)
    if strategy.do_sample:
        final_scores = replace(strategy, temperature=T).warpers()(cast(torch.LongTensor, seq), pen[None].clone())[0]
    elif strategy.kind == "greedy":
        final_scores = torch.full_like(pen, float("-inf"))
        final_scores[int(torch.argmax(pen))] = 0.0
    else:  # beam: no token is filtered by a warper; the beams choose
        final_scores = pen / T
    final = torch.softmax(final_scores, dim=-1)
    kept_all = torch.isfinite(final_scores) & (final_scores > -1e8)
    order = torch.argsort(pen, descending=True, stable=True)
    top_ids = order[:top] if ids is None else torch.tensor(list(ids), dtype=torch.long, device=dev)
    chosen = int(generated[step]) if generated else int(torch.argmax(pen))
    rank = int((order == chosen).nonzero()[0, 0]) if generated else 0
    # what the next token is predicted after: an encoder-decoder's decoder reads its start tokens and its own output
    # (the source is the encoder's, in the source's vocabulary), a decoder the prompt and its output
    before = list(start) if adapter.is_encoder_decoder else list(model_input)
    context = tuple(adapter.sequence_strings(before + prefix))[-12:]
    return StepView(
        step=step, ids=top_ids.cpu().numpy(), tokens=tuple(adapter.token_strings(top_ids.tolist())),
        logits=pen[top_ids].float().cpu().numpy(), raw_probs=raw.exp()[top_ids].float().cpu().numpy(),
        probs=log_probs.exp()[top_ids].float().cpu().numpy(), kept=kept_all[top_ids].cpu().numpy(),
        final=final[top_ids].float().cpu().numpy(), chosen=chosen, chosen_token=adapter.token_strings([chosen])[0],
        chosen_rank=rank, chosen_logit=float(pen[chosen]), chosen_prob=float(log_probs[chosen].exp()),
        chosen_final=float(final[chosen]), log_z=float(torch.logsumexp(scaled, dim=-1)),
        n_kept=int(kept_all.sum()), kept_mass=float(log_probs.exp()[kept_all].sum()), vocab_size=adapter.vocab_size,
        temperature=T, context=context,
    )
