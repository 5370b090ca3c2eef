"""The built-in RNN encoder-decoders (explorer.models.seq2seq.Seq2Seq: none / Bahdanau / Luong attention).

Text: the source is tokenized as the checkpoint's corpus was (words for the translation task, characters for
dates), with no special tokens; the decoder starts from `<bos>` and a target ends with `<eos>`.

`start`/`step` are the model's own `encode` and `decode_step`; with record=True each step also returns what the
attention computed (the `cross.0.*` entries of a record, one row per row of the batch). `run(source, target)`
steps the decoder through [<bos>] + target[:-1] (teacher forcing) and stacks those steps:

  encoder.embed (S, E)    encoder.out (S, H) the annotations h_j    encoder.final (H,) the initial decoder state
  encoder.rnn.{l}.*       every gate of the encoder GRU, recomputed from its weights (explorer.adapters.recurrent)
  cross.0.pattern (1, T, S) a_tj    cross.0.scores (1, T, S) e_tj    cross.0.context (T, H) c_t
  cross.0.q (T, A), cross.0.k (S, A), cross.0.v (A,): the two sides of the score (the attention's query/keys/v):
      e_tj = v · tanh(q_t + k_j) (Bahdanau, Luong concat) or q_t · k_j (Luong dot, general)
  decoder.s (T, H)        the decoder state the scores read (s_{t−1} for Bahdanau, s_t for Luong)
  logits (T, V)           row t: the distribution of target[t]

`run(..., ablate_source=True)`: the same with the encoder's outputs and the initial decoder state set to zero (how
much an output token relies on the source, for the model without attention).
"""
from __future__ import annotations

from typing import Iterable, Sequence, cast

import torch

from explorer.adapters.base import Acts, Adapter, CrossForm, Names, Record, Table, Unsupported
from explorer.adapters.protocols import Loaded
from explorer.adapters.recurrent import DIRS, recompute, weights_of
from explorer.adapters.text import DEFAULT_MAX_TOKENS, Encoded, limit_of, no_text, unknown_label
from explorer.data.vocab import Vocab
from explorer.text.token_text import readable

MAX_SOURCE = 400  # longer sources are truncated (with a note)

DecoderState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # (L, B, H); Luong input feeding: (that, h̃ (B, H))
# The generation state: the decoder state, the encoder outputs (B, S, H), the source mask (B, S) and, for Bahdanau
# attention, the keys U_a h (B, S, A) computed once
State = tuple[DecoderState, torch.Tensor, torch.Tensor, torch.Tensor | None]
Steps = list[tuple[torch.Tensor, dict[str, torch.Tensor]]]  # per decoder step: logits (1, V), what it recorded


class Seq2SeqAdapter(Adapter):
    is_encoder_decoder = True
    can_generate = True

    src_vocab: Vocab | None
    tgt_vocab: Vocab | None

    def __init__(self, loaded: Loaded) -> None:
        super().__init__(loaded)
        m = self.model
        self.attention_kind = m.attention_kind
        self.name = f"built-in RNN encoder–decoder ({self.attention_kind} attention)"
        self.src_vocab, self.tgt_vocab = loaded.vocabs.get("src_vocab"), loaded.vocabs.get("tgt_vocab")
        self.vocab_size = int(m.out.out_features)
        self.bos_id, self.eos_ids, self.pad_id = m.bos_id, (m.eos_id,), m.pad_id
        self.decoder_start = (m.bos_id,)
        corpus = (loaded.meta or {}).get("corpus") or {}
        self.char_level = corpus.get("generator") == "dates"

    # ------------------------------------------------------------------ text
    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        """Source (side "input"): the corpus tokenizer, unknown tokens read as <unk>. Target: its tokens + <eos>."""
        from explorer.data.vocab import clean_text, normalisation_changes, tokenize_chars, tokenize_words

        empty = no_text(text)
        if empty is not None:
            return empty
        vocab = self.src_vocab if side == "input" else self.tgt_vocab
        if vocab is None:
            return Encoded((), (), (f"{self.id} has no source/target vocabulary (src_vocab / tgt_vocab in its JSON), "
                                    "so it cannot read text.",))
        if self.char_level:
            words = tokenize_chars(text, lower=True) if side == "input" else \
                [c for c in clean_text(text).lower() if not c.isspace()]
        else:
            words = tokenize_words(text)
        limit, whose = limit_of(max_tokens or None, MAX_SOURCE if side == "input" else DEFAULT_MAX_TOKENS)
        what = "source" if side == "input" else "target"
        changed = normalisation_changes(text)
        notes = [f"The {what} vocabulary reads the text normalised: " + "; ".join(changed) + "."] if changed else []
        if len(words) > limit:
            notes.append(f"The {what} has {len(words):,} tokens; only the first {limit} are used ({whose}).")
            words = words[:limit]
        ids = vocab.encode(words)
        unknown = [w for w, i in zip(words, ids) if i == vocab.unk_id]
        if unknown:
            sample = ", ".join(repr(w) for w in dict.fromkeys(unknown[:8]))
            notes.append(f"{len(unknown)} {what} token(s) are not in the model's vocabulary and are read as <unk>: "
                         f"{sample}. The charts mark them as {unknown_label(unknown[0], '<unk>')}.")
        tokens = [readable(w) if i != vocab.unk_id else unknown_label(readable(w), "<unk>") for w, i in zip(words, ids)]
        special = [False] * len(ids)
        if side != "input":
            assert vocab.eos_id is not None  # the built-in vocabularies hold <eos> (explorer.data.vocab.SPECIALS)
            ids, tokens, special = ids + [vocab.eos_id], tokens + ["<eos>"], special + [True]
        return Encoded(tuple(ids), tuple(tokens), tuple(notes), False, len(unknown), tuple(special))

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        return [readable(w) for w in self.tgt_vocab.decode(ids)] if self.tgt_vocab is not None else \
            [f"#{i}" for i in ids]

    def detokenize(self, ids: Sequence[int]) -> str:
        words = [w for w, i in zip(self.tgt_vocab.decode(ids) if self.tgt_vocab is not None else
                                   [f"#{i}" for i in ids], ids) if i not in self.eos_ids]
        return ("" if self.char_level else " ").join(words)

    # ------------------------------------------------------------------ generation
    def start(self, ids: torch.Tensor, record: bool = False,
              ablate_source: bool = False) -> tuple[torch.Tensor, State, dict[str, torch.Tensor]]:
        """ids (B, S) sources (padded with <pad>) -> logits (B, V) of the first output token, after <bos>."""
        m = self.model
        mask = m.make_src_mask(ids)
        enc, state = m.encode(ids, mask)
        acts: dict[str, torch.Tensor] = {}
        if record:
            acts["encoder.final"] = m.hidden(state)[-1]
            acts["encoder.out"] = enc
        if ablate_source:
            enc = torch.zeros_like(enc)
            state = m.map_state(state, torch.zeros_like)
        U_h = m.attn.U_a(enc) if self.attention_kind == "bahdanau" else None
        if record and m.attn is not None:
            acts["cross.0.k"] = m.attn.keys(enc)
        bos = torch.full((ids.shape[0],), m.bos_id, dtype=torch.long, device=ids.device)
        logits, st, step = self.step((state, enc, mask, U_h), bos, record)
        acts.update(step)
        return logits, st, acts

    def step(self, state: State, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, State, dict[str, torch.Tensor]]:
        m = self.model
        dec, enc, mask, U_h = state
        out = m.decode_step(tokens, dec, enc, mask, _U_h=U_h)
        acts: dict[str, torch.Tensor] = {}
        if record:
            acts["decoder.s"] = out.query
            if out.context is not None:
                acts["cross.0.context"] = out.context
            if out.attention is not None:
                acts["cross.0.pattern"], acts["cross.0.scores"] = out.attention[:, None], out.scores[:, None]
                acts["cross.0.q"] = m.attn.query(out.query)
                if m.attn.v is not None:
                    acts["cross.0.v"] = m.attn.v.expand(tokens.shape[0], -1)
        return out.logits.float(), (out.state, enc, mask, U_h), acts

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        m = self.model
        return cast(torch.Tensor, (m.src_embedding if side == "input" else m.tgt_embedding)(ids))

    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        """Source embeddings (B, S, E) and decoder-input embeddings (B, T, E) -> (B, T, V): the model's own encode
        and decode_step, teacher-forced (every decoder position: `keep` is for decoder-only models)."""
        if target is None:
            raise Unsupported(f"{self.id} reads its output through its decoder: give the decoder inputs' embeddings.")
        m = self.model
        mask = torch.ones(embeds.shape[:2], dtype=torch.bool, device=embeds.device)
        enc, state = m.encode(None, mask, embeds=embeds)
        U_h = m.attn.U_a(enc) if self.attention_kind == "bahdanau" else None
        rows = []
        for t in range(target.shape[1]):
            out = m.decode_step(None, state, enc, mask, _U_h=U_h, emb=target[:, t])
            state = out.state
            rows.append(out.logits)
        return torch.stack(rows, 1)

    def reorder(self, state: State, idx: torch.Tensor) -> State:
        dec, enc, mask, U_h = state
        dec = self.model.map_state(dec, lambda s: s[:, idx], lambda h: h[idx])
        return (dec, enc[idx], mask[idx], U_h[idx] if U_h is not None else None)

    # ------------------------------------------------------------------ one forward pass
    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, ablate_source: bool = False,
            steps: Steps | None = None, **options: object) -> Record:
        """The record of the module docstring. Without a target only the encoder entries are recorded. steps: the
        (logits, activations) a generation loop recorded while it produced `target` (explorer.adapters.generation.sample
        with record=True): the record is assembled from them instead of stepping the decoder again."""
        acts = Acts(names)
        m = self.model
        with torch.inference_mode():
            src = torch.tensor([list(enc.ids)], dtype=torch.long, device=self.device)
            x = m.src_embedding(src)[0]
            acts.put("encoder.embed", x)
            if acts.want("encoder.rnn.*"):
                for layer, dirs in enumerate(recompute(weights_of(m.encoder), x.float())):
                    for d, states in enumerate(dirs):
                        for name, value in states.items():
                            acts.put(f"encoder.rnn.{layer}.{DIRS[d]}.{name}", value)
                    acts.put(f"encoder.rnn.{layer}.out", torch.cat([dd["h"] for dd in dirs], dim=-1))
            read = None
            if target is None:
                enc_out, state = m.encode(src)
                acts.put("encoder.out", enc_out[0])
                acts.put("encoder.final", m.hidden(state)[-1, 0])
            else:
                ids = list(target.ids)
                read = Encoded((m.bos_id, *ids[:-1]), ("<bos>", *target.tokens[:-1]), (), False, 0,
                               (True, *target.special[:-1]))
                if not steps or not steps[0][1]:
                    logits, state, first = self.start(src, True, ablate_source)
                    steps = [(logits, first)]
                    for t in ids[:-1]:
                        logits, state, step = self.step(state, torch.tensor([t], device=self.device), True)
                        steps.append((logits, step))
                first = steps[0][1]
                for name in ("encoder.out", "encoder.final", "cross.0.k"):
                    if name in first:
                        acts.put(name, first[name][0])
                for name in ("decoder.s", "cross.0.context", "cross.0.pattern", "cross.0.scores", "cross.0.q"):
                    if name in first:
                        stacked = torch.stack([s[name][0] for _, s in steps])               # (T, ...)
                        acts.put(name, stacked.transpose(0, 1) if stacked.dim() == 3 else stacked)
                if "cross.0.v" in first:
                    acts.put("cross.0.v", first["cross.0.v"][0])
                acts.put("logits", torch.cat([logits for logits, _ in steps]))
        return Record(enc, acts.out, read)

    def cross_form(self) -> CrossForm:
        """Read from the model: its attention module (Bahdanau scores s_{t−1}, Luong s_t), whether the decoder
        is fed the context (Bahdanau, none) or Luong's h̃_{t−1} (input feeding), checked against the width of the
        decoder GRU's W_ih (3H × input), and the output layer's input (W_o [s_t; c_t] or W_s h̃_t)."""
        m = self.model
        E, H, width = m.tgt_embedding.embedding_dim, m.hidden_size, int(m.decoder.weight_ih_l0.shape[1])
        kind = m.attention_kind
        fed = {"none": ("c", H), "bahdanau": ("c_t", H)}.get(kind) or \
            ((r"\tilde h_{t-1}", H) if getattr(m, "input_feeding", False) else None)
        inputs = (("y_{t-1}", E),) + ((fed,) if fed else ())
        if sum(n for _, n in inputs) != width:
            raise Unsupported(f"{self.id}: the decoder GRU reads {width} inputs, which is not "
                              f"{' + '.join(f'{n} ({s})' for s, n in inputs)}: its formula cannot be read.")
        output = ("s_t", "c" if kind == "none" else "c_t") if m.out.in_features == 2 * H else (r"\tilde h_t",)
        source = (f"decoder.weight_ih_l0: {tuple(m.decoder.weight_ih_l0.shape)} = 3H × ("
                  + " + ".join(f"{n}" for _, n in inputs) + f"); out.weight: {tuple(m.out.weight.shape)}")
        return CrossForm(kind, "s_{t-1}" if kind == "bahdanau" else "s_t", inputs, output, source=source)

    # ------------------------------------------------------------------ tables
    def tables(self) -> dict[str, Table]:
        from explorer.data.vocab import SPECIALS

        out = {}
        for key, attr, vocab, label in (("input", "src_embedding", self.src_vocab, "source-language embeddings"),
                                        ("target", "tgt_embedding", self.tgt_vocab, "target-language embeddings")):
            weight = getattr(self.model, attr).weight
            words = tuple(readable(w) for w in vocab.decode(range(weight.shape[0]))) if vocab is not None else \
                tuple(f"<id {i}>" for i in range(weight.shape[0]))
            freq = dict(vocab.freq) if vocab is not None and vocab.freq else None
            out[key] = Table(f"{attr} ({label})", weight, words, tuple(w in SPECIALS for w in words), freq)
        return out
