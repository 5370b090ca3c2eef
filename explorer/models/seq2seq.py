"""RNN encoder-decoder with optional attention.

- "none": Sutskever et al. (2014) / Cho et al. (2014). The last encoder state c is the ONLY information the
  decoder gets about the source: it is the decoder's initial state and (Cho et al.) is fed at every step.
- "bahdanau": Bahdanau, Cho & Bengio (2015), additive attention scored from the previous decoder state:
  e_tj = v_a^T tanh(W_a s_{t-1} + U_a h_j), c_t = sum_j alpha_tj h_j, s_t = GRU([y_{t-1}; c_t], s_{t-1}),
  logits = W_o [s_t; c_t].
- "luong-dot" / "luong-general" / "luong-concat": Luong, Pham & Manning (2015), scored from the current
  state: s_t = GRU(y_{t-1}, s_{t-1}); score = s_t^T h_j | s_t^T W_a h_j | v_a^T tanh(W_a [s_t; h_j]);
  h~_t = tanh(W_c [c_t; s_t]); logits = W_s h~_t. With input_feeding=True (Luong et al. section 3.3) the
  decoder input is [y_{t-1}; h~_{t-1}], so the decoder knows what it attended to before; the state is then the
  pair (s (num_layers, B, H), h~ (B, H)).

The encoder is a GRU, unidirectional by default; bidirectional=True (Bahdanau et al.'s encoder) runs H/2 units
each way and concatenates them, so annotations h_j stay (B, S, H) and the initial decoder state is
[forward final; backward final]. (The built-in recipes are in explorer.training.recipes.BUILTINS.)
Token ids follow explorer.data.vocab.SPECIALS: <pad>=0, <unk>=1, <bos>=2, <eos>=3.
Masks are bool (B, S), True on real source tokens; attention is a masked softmax (pads get weight 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

ATTENTIONS = ("none", "bahdanau", "luong-dot", "luong-general", "luong-concat")
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last dim with masked-out positions set to exactly 0. scores, mask: (B, S)."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return F.softmax(scores, dim=-1)


class BahdanauAttention(nn.Module):
    """Additive attention: e_j = v_a^T tanh(W_a s + U_a h_j)."""

    def __init__(self, hidden_size: int, attn_size: int | None = None) -> None:
        super().__init__()
        attn_size = attn_size or hidden_size
        self.W_a = nn.Linear(hidden_size, attn_size, bias=False)
        self.U_a = nn.Linear(hidden_size, attn_size, bias=True)
        self.v_a = nn.Linear(attn_size, 1, bias=False)

    def forward(self, s: torch.Tensor, h: torch.Tensor, mask: torch.Tensor | None,
                U_h: torch.Tensor | None = None):
        """s (B, H) decoder state, h (B, S, H) encoder outputs -> (alpha (B, S), context (B, H), scores (B, S)).

        U_h: optional precomputed U_a(h) (B, S, A), which does not depend on the decoder step."""
        if U_h is None:
            U_h = self.U_a(h)
        scores = self.v_a(torch.tanh(self.W_a(s).unsqueeze(1) + U_h)).squeeze(-1)  # (B, S)
        alpha = masked_softmax(scores, mask)
        context = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)                                # (B, H)
        return alpha, context, scores

    # The two sides of the score, e_j = v · tanh(q + k_j): q = W_a s (B, A), k = U_a h + b (B, S, A), v = v_a (A,)
    def query(self, s: torch.Tensor) -> torch.Tensor:
        return self.W_a(s)

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        return self.U_a(h)

    @property
    def v(self) -> torch.Tensor:
        return self.v_a.weight[0]


class LuongAttention(nn.Module):
    """Multiplicative / concat attention: dot s^T h_j, general s^T W_a h_j, concat v_a^T tanh(W_a [s; h_j])."""

    KINDS = ("dot", "general", "concat")

    def __init__(self, kind: str, hidden_size: int) -> None:
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"Luong attention kind must be one of {self.KINDS}, got {kind!r}")
        self.kind = kind
        if kind == "general":
            self.W_a = nn.Linear(hidden_size, hidden_size, bias=False)
        elif kind == "concat":
            self.W_a = nn.Linear(2 * hidden_size, hidden_size, bias=False)
            self.v_a = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, s: torch.Tensor, h: torch.Tensor, mask: torch.Tensor | None):
        """s (B, H), h (B, S, H) -> (alpha (B, S), context (B, H), scores (B, S))."""
        if self.kind == "dot":
            scores = torch.bmm(h, s.unsqueeze(2)).squeeze(2)
        elif self.kind == "general":
            scores = torch.bmm(self.W_a(h), s.unsqueeze(2)).squeeze(2)
        else:
            s_rep = s.unsqueeze(1).expand(-1, h.size(1), -1)
            scores = self.v_a(torch.tanh(self.W_a(torch.cat([s_rep, h], dim=-1)))).squeeze(-1)
        alpha = masked_softmax(scores, mask)
        context = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)
        return alpha, context, scores

    # The two sides of the score. dot: q = s, k = h; general: q = s, k = W_a h (e_j = q · k_j). concat:
    # W_a [s; h_j] = W_a' s + W_a'' h_j, so q = W_a' s, k = W_a'' h and e_j = v · tanh(q + k_j), v = v_a.
    def query(self, s: torch.Tensor) -> torch.Tensor:
        """s (B, H) -> q (B, A)."""
        return s @ self.W_a.weight[:, : s.shape[-1]].T if self.kind == "concat" else s

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        """h (B, S, H) -> k (B, S, A)."""
        if self.kind == "dot":
            return h
        return self.W_a(h) if self.kind == "general" else h @ self.W_a.weight[:, h.shape[-1]:].T

    @property
    def v(self) -> torch.Tensor | None:
        """v_a (A,) for the additive (concat) score, None for the multiplicative ones."""
        return self.v_a.weight[0] if self.kind == "concat" else None


@dataclass
class StepOutput:
    logits: torch.Tensor                 # (B, V)
    state: torch.Tensor | tuple          # (num_layers, B, H); Luong + input feeding: (that, h~ (B, H))
    attention: torch.Tensor | None       # (B, S), rows sum to 1
    context: torch.Tensor | None         # (B, H)
    scores: torch.Tensor | None          # (B, S) raw, pre-softmax
    query: torch.Tensor                  # (B, H) the decoder state the scores read: s_{t-1} (Bahdanau), s_t (Luong)


class Seq2Seq(nn.Module):
    """GRU encoder-decoder. src (B, S), tgt_in (B, T) ids; hidden size H is shared by encoder and decoder."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int = 64,
        hidden_size: int = 128,
        attention: str = "bahdanau",
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
        input_feeding: bool = False,
        pad_id: int = PAD_ID,
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
    ) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
        self.attention_kind = attention
        if bidirectional and hidden_size % 2:
            raise ValueError("a bidirectional encoder needs an even hidden_size")
        if input_feeding and not attention.startswith("luong"):
            raise ValueError("input_feeding applies to Luong attention only")
        self.hidden_size, self.num_layers, self.bidirectional = hidden_size, num_layers, bidirectional
        self.input_feeding = input_feeding
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        H, E = hidden_size, emb_dim
        rnn_dropout = dropout if num_layers > 1 else 0.0
        self.src_embedding = nn.Embedding(src_vocab_size, E, padding_idx=pad_id)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, E, padding_idx=pad_id)
        self.encoder = nn.GRU(E, H // 2 if bidirectional else H, num_layers, batch_first=True, dropout=rnn_dropout,
                              bidirectional=bidirectional)
        self.drop = nn.Dropout(dropout)
        if attention == "none":
            self.attn = None
            self.decoder = nn.GRU(E + H, H, num_layers, batch_first=True, dropout=rnn_dropout)
            self.out = nn.Linear(2 * H, tgt_vocab_size)           # W_o [s_t; c]
        elif attention == "bahdanau":
            self.attn = BahdanauAttention(H)
            self.decoder = nn.GRU(E + H, H, num_layers, batch_first=True, dropout=rnn_dropout)
            self.out = nn.Linear(2 * H, tgt_vocab_size)           # W_o [s_t; c_t]
        else:
            self.attn = LuongAttention(attention.split("-", 1)[1], H)
            self.decoder = nn.GRU(E + H if input_feeding else E, H, num_layers, batch_first=True,
                                  dropout=rnn_dropout)
            self.W_c = nn.Linear(2 * H, H, bias=False)            # h~_t = tanh(W_c [c_t; s_t])
            self.out = nn.Linear(H, tgt_vocab_size)               # W_s h~_t

    # ------------------------------------------------------------------ encoder
    def make_src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return src != self.pad_id

    def encode(self, src: torch.Tensor | None, src_mask: torch.Tensor | None = None,
               embeds: torch.Tensor | None = None):
        """src (B, S) -> encoder_outputs (B, S, H) (zeros at pads), initial decoder state (num_layers, B, H).

        The state is the encoder's final hidden state after each sequence's last real token. embeds (B, S, E):
        source embeddings used instead of src_embedding(src) (then src may be None and src_mask is needed)."""
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        lengths = src_mask.sum(dim=1).clamp(min=1).cpu()
        x = self.drop(self.src_embedding(src) if embeds is None else embeds)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h_n = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src_mask.size(1))
        if self.bidirectional:  # (2L, B, H/2) -> (L, B, H): [forward; backward] per layer
            h_n = h_n.view(self.num_layers, 2, *h_n.shape[1:]).transpose(1, 2).reshape(self.num_layers, h_n.size(1), -1)
        if self.input_feeding:
            return out, (h_n, h_n.new_zeros(h_n.size(1), self.hidden_size))
        return out, h_n

    # ------------------------------------------------------------------ decoder
    def _fixed_context(self, encoder_outputs: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's summary of the source, (B, H): the last real output (bidirectional: forward half at
        the last real token, backward half at the first token), i.e. the top layer's final state."""
        last = (src_mask.sum(dim=1) - 1).clamp(min=0)
        rows = torch.arange(encoder_outputs.size(0), device=last.device)
        if self.bidirectional:
            half = self.hidden_size // 2
            return torch.cat([encoder_outputs[rows, last, :half], encoder_outputs[:, 0, half:]], -1)
        return encoder_outputs[rows, last]

    def hidden(self, state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The decoder's hidden state (num_layers, B, H) of a decoder state: the tensor itself, or the first of
        Luong input feeding's (s, h~) pair."""
        return state[0] if self.input_feeding else state

    def map_state(self, state: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
                  hidden: Callable[[torch.Tensor], torch.Tensor],
                  feed: Callable[[torch.Tensor], torch.Tensor] | None = None):
        """A decoder state with `hidden` applied to its hidden state (num_layers, B, H) and `feed` (default:
        `hidden`) to input feeding's h~ (B, H), e.g. to pick beams or zero it."""
        if not self.input_feeding:
            return hidden(state)
        return hidden(state[0]), (feed or hidden)(state[1])

    def decode_step(self, y_prev: torch.Tensor | None, state: torch.Tensor, encoder_outputs: torch.Tensor,
                    src_mask: torch.Tensor | None = None, _U_h: torch.Tensor | None = None,
                    emb: torch.Tensor | None = None) -> StepOutput:
        """One decoder step. y_prev (B,) ids (or emb (B, E), its embedding), state (num_layers, B, H),
        encoder_outputs (B, S, H)."""
        if src_mask is None:
            src_mask = torch.ones(encoder_outputs.shape[:2], dtype=torch.bool, device=encoder_outputs.device)
        emb = self.drop(self.tgt_embedding(y_prev) if emb is None else emb)   # (B, E)
        kind = self.attention_kind
        if kind == "none":
            c = self._fixed_context(encoder_outputs, src_mask)            # (B, H)
            o, state = self.decoder(torch.cat([emb, c], -1).unsqueeze(1), state)
            s = o.squeeze(1)
            logits = self.out(self.drop(torch.cat([s, c], -1)))
            return StepOutput(logits, state, None, c, None, s)
        if kind == "bahdanau":
            s_prev = state[-1]
            alpha, c, scores = self.attn(s_prev, encoder_outputs, src_mask, _U_h)   # scored from s_{t-1}
            o, state = self.decoder(torch.cat([emb, c], -1).unsqueeze(1), state)
            s = o.squeeze(1)
            logits = self.out(self.drop(torch.cat([s, c], -1)))
            return StepOutput(logits, state, alpha, c, scores, s_prev)
        if self.input_feeding:                                            # Luong: scored from s_t
            s_prev, h_tilde_prev = state
            o, s_new = self.decoder(torch.cat([emb, h_tilde_prev], -1).unsqueeze(1), s_prev)
        else:
            o, s_new = self.decoder(emb.unsqueeze(1), state)
        s = o.squeeze(1)
        alpha, c, scores = self.attn(s, encoder_outputs, src_mask)
        h_tilde = torch.tanh(self.W_c(torch.cat([c, s], -1)))
        logits = self.out(self.drop(h_tilde))
        return StepOutput(logits, (s_new, h_tilde) if self.input_feeding else s_new, alpha, c, scores, s)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor):
        """Teacher forcing. src (B, S), tgt_in (B, T) (starts with <bos>) -> logits (B, T, V), attentions (B, T, S).

        For attention="none" the attentions are all zeros."""
        src_mask = self.make_src_mask(src)
        enc, state = self.encode(src, src_mask)
        if self.attention_kind == "none" or (self.attention_kind.startswith("luong") and not self.input_feeding):
            return self._forward_parallel(tgt_in, state, enc, src_mask)
        # Bahdanau / input feeding: the decoder input depends on the previous attention: step through time
        U_h = self.attn.U_a(enc) if self.attention_kind == "bahdanau" else None
        logits, atts = [], []
        for t in range(tgt_in.size(1)):
            step = self.decode_step(tgt_in[:, t], state, enc, src_mask, _U_h=U_h)
            state = step.state
            logits.append(step.logits)
            atts.append(step.attention if step.attention is not None else torch.zeros_like(src, dtype=enc.dtype))
        return torch.stack(logits, 1), torch.stack(atts, 1)

    def _forward_parallel(self, tgt_in, state, enc, src_mask):
        """Same numbers as stepping decode_step, computed with one GRU call over all T steps (possible
        whenever the decoder input does not depend on the attention: "none" and Luong without input feeding)."""
        emb = self.drop(self.tgt_embedding(tgt_in))                               # (B, T, E)
        B, T = tgt_in.shape
        if self.attention_kind == "none":
            c = self._fixed_context(enc, src_mask)                                # (B, H)
            c_rep = c.unsqueeze(1).expand(-1, T, -1)
            s, _ = self.decoder(torch.cat([emb, c_rep], -1), state)              # (B, T, H)
            logits = self.out(self.drop(torch.cat([s, c_rep], -1)))
            return logits, torch.zeros(B, T, enc.size(1), dtype=enc.dtype, device=enc.device)
        s, _ = self.decoder(emb, state)                                           # (B, T, H)
        S = enc.size(1)
        s_flat = s.reshape(B * T, -1)
        enc_rep = enc.unsqueeze(1).expand(-1, T, -1, -1).reshape(B * T, S, -1)
        mask_rep = src_mask.unsqueeze(1).expand(-1, T, -1).reshape(B * T, S)
        alpha, c, _ = self.attn(s_flat, enc_rep, mask_rep)
        h_tilde = torch.tanh(self.W_c(torch.cat([c, s_flat], -1)))
        logits = self.out(self.drop(h_tilde)).view(B, T, -1)
        return logits, alpha.view(B, T, S)
