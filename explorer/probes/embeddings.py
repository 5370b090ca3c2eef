"""Word embeddings: tables of vectors from any model or a text file, neighbours, analogies, two-axis views,
and contextual embeddings per layer.

Tables (`EmbeddingTable`): the rows of a model's input embedding matrix with the token of each row
  builtin:word2vec   SkipGram.in_embed (v, the word vectors; Mikolov et al. 2013)
  built-in LMs       RNNLanguageModel.embedding, tiny GPT `wte`, seq2seq `src_embedding` / `tgt_embedding`
  Hugging Face       model.get_input_embeddings() with the tokenizer's pieces (id order)
  state dicts        the 2-D tensor named like an embedding (embed / wte / emb), with the vocab.json if given
  text files         "word v1 v2 ... vD" per line (GloVe / word2vec text format, optional "N D" header line)

Similarity is cosine: cos(u, v) = u·v / (|u| |v|). Analogies use 3CosAdd (Mikolov et al. 2013; Levy & Goldberg
2014): answer = argmax_x cos(x, â − b̂ + ĉ) over x ∉ {a, b, c}, with x̂ = x / |x|. Two-axis views (as in whatlies)
place a word w on the axis a→b at (w − a)·(b − a) / |b − a|², so a sits at 0 and b at 1.

Contextual embeddings (`ContextTrace.states`, (L+1, T, C)): layer 0 is the model's input representation and
layer l its l-th layer output: Hugging Face `output_hidden_states` (encoder-decoders: the encoder's), built-in
RNN LMs and seq2seq encoders the output of each recurrent layer, tiny GPT the output of each block.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from explorer.adapters.text import encode
from explorer.data.english import word_class

MAX_FILE_ROWS = 1_000_000
MAX_TYPED_WORDS = 64
_UNUSED = re.compile(r"^\[unused\d+\]$|^<extra_id_\d+>$")


class EmbeddingError(ValueError):
    """A model or file has no embedding table this view can read; str() is a message for the user."""


class EmbeddingFileError(EmbeddingError):
    """A malformed embedding text file; `line` is the 1-based line number (0: the file as a whole)."""

    def __init__(self, line: int, reason: str) -> None:
        self.line, self.reason = line, reason
        super().__init__(f"line {line}: {reason}" if line else reason)


# -------------------------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class EmbeddingTable:
    """An embedding table with the token of each row.

    words: (V,) token strings; vectors: (V, D) float32; order: (V,) row indices, most frequent first (see
    order_note); classes: (V,) word class (explorer.data.english.word_class) or None; special: (V,) True for
    special/unused entries (listed last in `order`). key: a stable id (model id + source + dtype, or a hash of
    the uploaded file) used by caches; index: word -> first row.
    """

    key: str
    source: str
    words: tuple[str, ...]
    vectors: np.ndarray
    order: np.ndarray
    order_note: str
    classes: tuple[str | None, ...]
    special: tuple[bool, ...]
    subword: bool = False
    notes: tuple[str, ...] = ()
    index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # derived arrays (unit rows), memoised

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


def make_table(key: str, source: str, words: Sequence[str], vectors: np.ndarray, freq: dict[str, int] | None = None,
               special: Sequence[bool] | None = None, order_note: str = "", subword: bool = False,
               notes: Iterable[str] = ()) -> EmbeddingTable:
    """Build an EmbeddingTable: frequency order from `freq` (else row order), specials last, classes filled in."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise EmbeddingError(f"{source}: an embedding table must be 2-D (rows × dimensions), got shape {vectors.shape}.")
    words = tuple(str(w) for w in words)
    if len(words) != vectors.shape[0]:
        raise EmbeddingError(f"{source}: {len(words)} words for {vectors.shape[0]} vectors.")
    special = tuple(bool(s) for s in special) if special is not None else (False,) * len(words)
    rows = np.arange(len(words))
    if freq:
        counts = np.array([freq.get(w, -1) for w in words], dtype=np.int64)
        rows = np.argsort(-counts, kind="stable")
        order_note = order_note or "by corpus frequency (the vocabulary's counts)"
    is_special = np.array(special, dtype=bool)
    order = np.concatenate([rows[~is_special[rows]], rows[is_special[rows]]]) if len(rows) else rows
    index: dict[str, int] = {}
    for i, w in enumerate(words):
        index.setdefault(w, i)
    classes = tuple(word_class(w) if not s else None for w, s in zip(words, special))
    return EmbeddingTable(key, source, words, vectors, order.astype(np.int64), order_note or "row order", classes,
                          special, subword, tuple(notes), index)


def _vocab_words(vocab: Any, n_rows: int) -> tuple[list[str], list[bool], dict | None]:
    """Words of a built-in Vocab for n_rows rows (extra rows named <id N>), specials flagged, counts."""
    from explorer.data.vocab import SPECIALS

    itos = list(vocab.itos) if vocab is not None else []
    words = [itos[i] if i < len(itos) else f"<id {i}>" for i in range(n_rows)]
    special = [w in SPECIALS or i >= len(itos) for i, w in enumerate(words)]
    freq = dict(getattr(vocab, "freq", {}) or {}) if vocab is not None else None
    return words, special, freq or None


def _hf_words(tokenizer: Any, n_rows: int) -> tuple[list[str], list[bool]]:
    if tokenizer is None:
        return [f"<id {i}>" for i in range(n_rows)], [False] * n_rows
    n_tok = len(tokenizer)
    words = [str(t) if t is not None else f"<id {i}>"
             for i, t in enumerate(tokenizer.convert_ids_to_tokens(list(range(min(n_rows, n_tok)))))]
    words += [f"<id {i}>" for i in range(len(words), n_rows)]
    specials = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = [i in specials or i >= n_tok or bool(_UNUSED.match(w)) for i, w in enumerate(words)]
    return words, special


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy().copy()


def table_sources(loaded: Any) -> dict[str, str]:
    """The embedding tables a model offers: source key -> label (the first is the default)."""
    model = getattr(loaded, "model", None)
    if model is not None and hasattr(model, "src_embedding") and hasattr(model, "tgt_embedding"):
        return {"input": "source-language embeddings (src_embedding)", "target": "target-language embeddings (tgt_embedding)"}
    return {"input": "input embeddings"}


_STATE_HINTS = ("in_embed", "wte", "word_embeddings", "embedding", "embed", "emb", "encoder.weight")


def _state_dict_table(loaded: Any) -> tuple[str, torch.Tensor]:
    state = getattr(loaded, "state_dict", None) or {}
    candidates = [(k, v) for k, v in state.items() if isinstance(v, torch.Tensor) and v.ndim == 2 and v.is_floating_point()]
    for hint in _STATE_HINTS:
        named = [(k, v) for k, v in candidates if hint in k.lower() and "pos" not in k.lower()]
        if named:
            return max(named, key=lambda kv: kv[1].shape[0])
    raise EmbeddingError(
        f"{getattr(loaded, 'id', 'This model')} has no tensor named like an embedding table "
        f"(one of {', '.join(_STATE_HINTS)})."
    )


def embedding_table(loaded: Any, source: str = "input") -> EmbeddingTable:
    """The input-embedding table of any registry.LoadedModel (see the module docstring). Raises EmbeddingError."""
    mid = str(getattr(loaded, "id", "model"))
    key = f"{mid}#{source}#{getattr(loaded, 'dtype', 'float32')}"
    model = getattr(loaded, "model", None)
    vocabs = getattr(loaded, "vocabs", {}) or {}
    tokenizer = getattr(loaded, "tokenizer", None)
    with torch.inference_mode():
        if model is None:
            name, weight = _state_dict_table(loaded)
            words, special, freq = _vocab_words(vocabs.get("vocab"), weight.shape[0])
            notes = [] if vocabs.get("vocab") is not None else [
                f"No vocab.json came with {mid}: rows are named by their id."]
            return make_table(key, f"{mid} · {name}", words, _np(weight), freq, special,
                              "" if freq else "row order (ids)", notes=notes)
        if tokenizer is not None or hasattr(model, "get_input_embeddings") and not _is_builtin(model):
            weight = model.get_input_embeddings().weight
            words, special = _hf_words(tokenizer, weight.shape[0])
            return make_table(key, f"{mid} · get_input_embeddings()", words, _np(weight), None, special,
                              "id order (a Hugging Face tokenizer stores no counts; special and [unused] entries "
                              "last)", subword=tokenizer is not None)
        for attr, vocab_key, label in _BUILTIN_ATTRS[source]:
            module = getattr(model, attr, None)
            if isinstance(module, torch.nn.Embedding):
                vocab = vocabs.get(vocab_key) or vocabs.get("vocab")
                words, special, freq = _vocab_words(vocab, module.weight.shape[0])
                note = "" if freq else "id order (built-in vocabularies are built most frequent first)"
                return make_table(key, f"{mid} · {attr} ({label})", words, _np(module.weight), freq, special, note)
    raise EmbeddingError(f"{mid} has no input embedding table this view can read.")


_BUILTIN_ATTRS: dict[str, list[tuple[str, str, str]]] = {
    "input": [("in_embed", "vocab", "v: the word vectors"), ("embedding", "vocab", "input embeddings"),
              ("wte", "vocab", "token embeddings"), ("src_embedding", "src_vocab", "source embeddings"),
              ("embed", "vocab", "input embeddings")],
    "target": [("tgt_embedding", "tgt_vocab", "target embeddings")],
}


def _is_builtin(model: Any) -> bool:
    return type(model).__module__.startswith("explorer.")


# ------------------------------------------------------------------------------------------ text files
def parse_text_embeddings(data: bytes, name: str = "upload", max_rows: int = MAX_FILE_ROWS) -> EmbeddingTable:
    """Parse "word v1 ... vD" lines (GloVe / word2vec text format, optional "N D" header) from bytes.

    Raises EmbeddingFileError with the 1-based line number and the reason for the first problem found.
    Words may contain spaces (the last D fields are the numbers). Duplicate words keep their first row.
    """
    if not data or not data.strip():
        raise EmbeddingFileError(0, "The file is empty.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EmbeddingFileError(line, f"not UTF-8 text (byte 0x{data[exc.start]:02x}); is this a binary word2vec "
                                       "file? Save it in the text format.") from None
    lines = text.split("\n")
    header_n: int | None = None
    dim: int | None = None
    words: list[str] = []
    rows: list[np.ndarray] = []
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    first = lines[start].split() if start < len(lines) else []
    if len(first) == 2 and all(re.fullmatch(r"\d+", f) for f in first):
        header_n, dim = int(first[0]), int(first[1])
        if dim < 1:
            raise EmbeddingFileError(start + 1, f"the header says {dim} dimensions.")
        start += 1
    for lineno in range(start, len(lines)):
        raw = lines[lineno].rstrip("\r")
        if not raw.strip():
            continue
        parts = raw.split()
        if dim is None:
            if len(parts) < 2:
                raise EmbeddingFileError(lineno + 1, "expected a word followed by numbers, found one field.")
            dim = _count_numbers(parts)
            if dim == 0:
                raise EmbeddingFileError(lineno + 1, f"'{parts[-1][:40]}' is not a number.")
        if len(parts) < dim + 1:
            raise EmbeddingFileError(lineno + 1, f"expected a word and {dim} numbers, found {len(parts)} field(s)"
                                                 f" ({len(parts) - 1} number(s)).")
        word = " ".join(parts[: len(parts) - dim])
        try:
            vec = np.array(parts[len(parts) - dim:], dtype=np.float32)
        except ValueError:
            bad = next((p for p in parts[len(parts) - dim:] if not _is_number(p)), parts[-1])
            raise EmbeddingFileError(lineno + 1, f"'{bad[:40]}' is not a number.") from None
        if len(parts) > dim + 1 and _is_number(parts[len(parts) - dim - 1]):
            raise EmbeddingFileError(lineno + 1, f"expected {dim} numbers after the word, found more "
                                                 f"({_count_numbers(parts)}).")
        if not np.isfinite(vec).all():
            raise EmbeddingFileError(lineno + 1, "the vector holds NaN or infinite values.")
        words.append(word)
        rows.append(vec)
        if len(words) > max_rows:
            raise EmbeddingFileError(lineno + 1, f"more than {max_rows:,} vectors: too large for the explorer.")
    if not words:
        raise EmbeddingFileError(0, "The file holds no vectors.")
    notes = []
    if header_n is not None and header_n != len(words):
        notes.append(f"The header announces {header_n:,} vectors; the file holds {len(words):,}.")
    n_dups = len(words) - len(set(words))
    if n_dups:
        notes.append(f"{n_dups:,} duplicate word(s): the first vector of each is used for look-ups.")
    digest = hashlib.sha256(data).hexdigest()[:16]
    return make_table(f"file:{digest}", f"{name} ({len(words):,} × {dim})", words, np.stack(rows), None, None,
                      "file order (such files are usually sorted most frequent first)", notes=notes)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _count_numbers(parts: Sequence[str]) -> int:
    """How many trailing fields are numbers (the word is the rest, at least the first field)."""
    n = 0
    for p in reversed(parts[1:]):
        if not _is_number(p):
            break
        n += 1
    return n


def table_to_text(words: Sequence[str], vectors: np.ndarray, header: bool = False) -> bytes:
    """The text format of `parse_text_embeddings` (for tests and export)."""
    lines = [f"{len(words)} {vectors.shape[1]}"] if header else []
    lines += [w + " " + " ".join(f"{v:.6g}" for v in row) for w, row in zip(words, vectors)]
    return ("\n".join(lines) + "\n").encode()


# -------------------------------------------------------------------------------------- typed words
@dataclass(frozen=True)
class Located:
    """A typed word looked up in a table: row (None if absent), the entry found, and the tokenizer's pieces."""

    word: str
    row: int | None
    entry: str | None = None
    pieces: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.row is not None


def typed_words(text: str, limit: int = MAX_TYPED_WORDS) -> list[str]:
    """Distinct words of `text` in order (split on spaces and commas, outer punctuation stripped, case kept)."""
    from explorer.data.vocab import clean_text

    out: list[str] = []
    for raw in re.split(r"[\s,;]+", clean_text(text or "")):
        word = raw.strip(".!?:;\"()[]{}") or raw
        if word and word not in out:
            out.append(word)
        if len(out) >= limit:
            break
    return out


def locate(table: EmbeddingTable, word: str, tokenizer: Any = None) -> Located:
    """Find `word`: exactly, lowercased, or (subword tables) as the tokenizer's single piece; else its pieces."""
    for candidate in (word, word.lower()):
        row = table.index.get(candidate)
        if row is not None:
            return Located(word, row, candidate)
    pieces: tuple[str, ...] = ()
    if tokenizer is not None:
        try:
            pieces = tuple(str(p) for p in tokenizer.tokenize(word))
        except Exception:
            pieces = ()
        if len(pieces) == 1 and pieces[0] in table.index:
            return Located(word, table.index[pieces[0]], pieces[0], pieces)
    return Located(word, None, None, pieces)


def not_found_message(missing: Sequence[Located], table: EmbeddingTable) -> str:
    """One sentence for the words that are not in the table (with their word pieces for subword models).

    Bounded whatever was typed: at most 12 words of 40 characters, each with at most 8 pieces."""
    def short(text: str, n: int = 40) -> str:
        return text if len(text) <= n else text[:n] + "…"

    parts = []
    for loc in missing[:12]:
        if loc.pieces and len(loc.pieces) > 1:
            pieces = " + ".join(short(p, 20) for p in loc.pieces[:8]) + (" + …" if len(loc.pieces) > 8 else "")
            parts.append(f"'{short(loc.word)}' (split into {pieces})")
        else:
            parts.append(f"'{short(loc.word)}'")
    if len(missing) > 12:
        parts.append(f"and {len(missing) - 12} more")
    what = "is not an entry" if len(missing) == 1 else "are not entries"
    tail = " Subword models read such words as the pieces shown; only whole entries have one vector." \
        if table.subword else ""
    return f"{', '.join(parts)} {what} of the table ({table.source}).{tail}"


# ---------------------------------------------------------------------------- neighbours and analogies
def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their norm (zero rows stay zero): (V, D) float32."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


@dataclass(frozen=True)
class Ranked:
    """Top entries by cosine: rows (k,), words (k,), cos (k,) float."""

    rows: tuple[int, ...]
    words: tuple[str, ...]
    cos: tuple[float, ...]


def unit_table(table: EmbeddingTable) -> np.ndarray:
    """unit_vectors(table.vectors), computed once per table."""
    if "unit" not in table.cache:
        table.cache["unit"] = unit_vectors(table.vectors)
    return table.cache["unit"]


def _top(table: EmbeddingTable, target: np.ndarray, k: int, exclude: Iterable[int]) -> Ranked:
    sims = unit_table(table) @ _unit(np.asarray(target, dtype=np.float32))
    sims = sims.astype(np.float64)
    sims[list(set(exclude))] = -np.inf
    if "special_rows" not in table.cache:
        table.cache["special_rows"] = np.flatnonzero(np.array(table.special, dtype=bool))
    sims[table.cache["special_rows"]] = -np.inf
    k = max(0, min(k, int(np.isfinite(sims).sum())))
    part = np.argpartition(-sims, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    rows = part[np.lexsort((part, -sims[part]))]
    return Ranked(tuple(int(r) for r in rows), tuple(table.words[r] for r in rows), tuple(float(sims[r]) for r in rows))


def neighbours(table: EmbeddingTable, row: int, k: int = 10) -> Ranked:
    """The k entries with the highest cosine similarity to entry `row` (itself and special entries left out)."""
    return _top(table, table.vectors[row], k, [row])


def cosine(table: EmbeddingTable, r1: int, r2: int) -> float:
    return float(_unit(table.vectors[r1].astype(np.float64)) @ _unit(table.vectors[r2].astype(np.float64)))


def analogy(table: EmbeddingTable, a: int, b: int, c: int, k: int = 5) -> Ranked:
    """3CosAdd: a − b + c (e.g. king − man + woman): the k entries x ∉ {a, b, c} maximising cos(x, â − b̂ + ĉ)."""
    V = table.vectors
    target = _unit(V[a]) - _unit(V[b]) + _unit(V[c])
    return _top(table, target, k, [a, b, c])


def axis_coords(table: EmbeddingTable, rows: Sequence[int], x_pair: tuple[int, int],
                y_pair: tuple[int, int] | None = None) -> np.ndarray:
    """(N, 1 or 2) positions on axes a→b: (w − a)·(b − a) / |b − a|² (a at 0, b at 1). Raises EmbeddingError."""
    V = table.vectors
    W = V[np.asarray(rows, dtype=np.int64)]  # float32 rows; the pair arithmetic in float64
    cols = []
    for pair in [x_pair] + ([y_pair] if y_pair is not None else []):
        a, b = V[pair[0]].astype(np.float64), V[pair[1]].astype(np.float64)
        d = b - a
        dd = float(d @ d)
        if dd == 0:
            raise EmbeddingError(f"'{table.words[pair[0]]}' and '{table.words[pair[1]]}' have the same vector: "
                                 "their direction is undefined.")
        cols.append(((W @ d.astype(np.float32)).astype(np.float64) - a @ d) / dd)
    return np.stack(cols, axis=1).astype(np.float32)


def background_rows(table: EmbeddingTable, n: int) -> np.ndarray:
    """The rows of the n most frequent entries (specials last), clamped to the table size: (min(n, V),)."""
    return table.order[: max(0, min(int(n), len(table)))]


# ----------------------------------------------------------------------------------- contextual
class ContextError(EmbeddingError):
    """The model has no contextual layers (or the text gives no tokens); str() is for the user."""


@dataclass(frozen=True)
class ContextTrace:
    """A sentence through the model. states: L+1 arrays (T, C_l) float32 (C_0 may differ from the layers' width,
    e.g. an RNN's embedding size); layer_names: (L+1,); tokens, special: (T,)."""

    model_id: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    layer_names: tuple[str, ...]
    states: tuple[np.ndarray, ...]
    what: str
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.tokens)


def contextual(loaded: Any, text: str) -> ContextTrace:
    """Hidden states of every layer for `text`: see the module docstring. Raises ContextError."""
    model = getattr(loaded, "model", None)
    mid = str(getattr(loaded, "id", "model"))
    if model is None or type(model).__name__ == "SkipGram":
        raise ContextError(f"{mid} has one vector per word and no layers: there are no contextual embeddings. "
                           "Pick a language model or a transformer.")
    vocab_key = "src_vocab" if hasattr(model, "src_embedding") else "vocab"
    enc = encode(loaded, text, vocab_key=vocab_key)
    if not len(enc):
        raise ContextError(" ".join(enc.notes) or "Type a sentence.")
    device = next(model.parameters()).device
    ids = torch.tensor([list(enc.ids)], dtype=torch.long, device=device)
    with torch.inference_mode():
        if getattr(loaded, "tokenizer", None) is not None or not _is_builtin(model):
            states, names, what = _hf_states(model, ids)
        elif hasattr(model, "rnn") and hasattr(model, "embedding"):
            states = _rnn_layers(model.rnn, model.embedding(ids))
            names = ["embedding"] + [f"{model.rnn.__class__.__name__} layer {i + 1}" for i in range(len(states) - 1)]
            what = "layer 0: the input embedding; layer l: the output h_t of recurrent layer l"
        elif hasattr(model, "encoder") and hasattr(model, "src_embedding"):
            states = _rnn_layers(model.encoder, model.src_embedding(ids))
            names = ["embedding"] + [f"encoder GRU layer {i + 1}" for i in range(len(states) - 1)]
            what = "the encoder: layer 0 its input embedding, layer l the output of GRU layer l"
        elif hasattr(model, "wte") and hasattr(model, "h"):
            T = ids.shape[1]
            x = model.wte(ids) + model.position_embeddings(T)
            states = [x]
            for block in model.h:
                x, _ = block(x)
                states.append(x)
            names = ["wte + wpe"] + [f"block {i + 1}" for i in range(len(model.h))]
            what = "layer 0: token + position embedding; layer l: the output of block l (before ln_f)"
        else:
            raise ContextError(f"{mid}: this view cannot read its layers.")
    arrays = tuple(_np(s[0]) for s in states)  # L+1 × (T, C_l)
    return ContextTrace(mid, enc.tokens, enc.special or (False,) * len(enc), tuple(names), arrays, what, enc.notes)


def _hf_states(model: Any, ids: torch.Tensor) -> tuple[list[torch.Tensor], list[str], str]:
    mask = torch.ones_like(ids)
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        out = model.get_encoder()(input_ids=ids, attention_mask=mask, output_hidden_states=True, return_dict=True)
        what = "the encoder's hidden_states: layer 0 the embedding output, layer l the output of encoder layer l"
    else:
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, return_dict=True)
        what = "hidden_states (output_hidden_states=True): layer 0 the embedding output, layer l the output of layer l"
    hidden = list(out.hidden_states)
    names = ["embeddings"] + [f"layer {i}" for i in range(1, len(hidden))]
    return hidden, names, what


def _rnn_layers(rnn: torch.nn.RNNBase, x: torch.Tensor) -> list[torch.Tensor]:
    """[input, output of layer 1, ..., output of layer L] of a (batch_first) nn.RNN/GRU/LSTM, from zero states."""
    states = [x]
    dirs = 2 if rnn.bidirectional else 1
    for layer in range(rnn.num_layers):
        single = type(rnn)(x.shape[-1], rnn.hidden_size, 1, batch_first=True, bidirectional=rnn.bidirectional,
                           bias=rnn.bias, **({"nonlinearity": rnn.nonlinearity} if isinstance(rnn, torch.nn.RNN) else {}))
        single = single.to(device=x.device, dtype=x.dtype)
        params = {}
        for suffix in ([""] + (["_reverse"] if dirs == 2 else [])):
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                src = getattr(rnn, f"{kind}_l{layer}{suffix}", None)
                if src is not None:
                    params[f"{kind}_l0{suffix}"] = src
        single.load_state_dict(params, strict=True)
        x, _ = single(x)
        states.append(x)
    return states


def find_span(tokens: Sequence[str], word: str) -> tuple[int, int] | None:
    """[start, end) of the first run of tokens that spells `word` (pieces' ##, Ġ, ▁ markers ignored, any case)."""
    target = word.strip().lower()
    if not target:
        return None
    clean = [re.sub(r"^(##|Ġ|▁)", "", t).lower() for t in tokens]
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
    """cos: (L+1,) cosine similarity per layer between the word's vectors in sentence A and sentence B
    (mean over its pieces); spans: its token run in each sentence."""

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
            raise ContextError(f"'{word}' is not among the tokens of sentence {label} ({' '.join(trace.tokens)[:200]}).")
        spans.append(span)
    cos = np.zeros(len(a.states), dtype=np.float64)
    for layer, (sa, sb) in enumerate(zip(a.states, b.states)):
        va = sa[spans[0][0]:spans[0][1]].mean(axis=0).astype(np.float64)
        vb = sb[spans[1][0]:spans[1][1]].mean(axis=0).astype(np.float64)
        norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
        cos[layer] = float(va @ vb) / norm if norm > 0 else 0.0
    return Drift(word, a.layer_names, cos.astype(np.float32), spans[0], spans[1])


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
    from explorer.projection import ProjectionError, fit

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
    "EmbeddingTable", "EmbeddingError", "EmbeddingFileError", "make_table", "table_sources", "embedding_table",
    "parse_text_embeddings", "table_to_text", "Located", "typed_words", "locate", "not_found_message",
    "unit_vectors", "unit_table", "Ranked", "neighbours", "cosine", "analogy", "axis_coords", "background_rows", "ContextError",
    "ContextTrace", "contextual", "find_span", "Drift", "drift", "ContextProjection", "context_projection",
]
