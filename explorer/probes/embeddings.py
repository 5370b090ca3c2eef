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

from explorer.adapters.base import Unsupported
from explorer.data.english import word_class

MAX_FILE_ROWS = 1_000_000
MAX_TYPED_WORDS = 64


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

    words: (V,) token strings; vectors: (V, D) float32; order: (V,) row indices in `order_kind` order (see
    order_note): "frequency" (corpus counts, most frequent first), "id" (token ids) or "file" (the file's line
    order); classes: (V,) word class (explorer.data.english.word_class) or None; special: (V,) True for
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
    order_kind: str = "id"
    index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # derived arrays (unit rows), memoised

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def first(self, n: int | str = "N", whole: bool = False) -> str:
        """What the first n rows of `order` are, e.g. "5,000 most frequent entries", "N first entries (token-id
        order)", "300 first whole-word entries (file order)"."""
        count = f"{n:,}" if isinstance(n, int) else n
        kind = "most frequent" if self.order_kind == "frequency" else "first"
        where = {"frequency": "", "file": " (file order)"}.get(self.order_kind, " (token-id order)")
        return f"{count} {kind}{' whole-word' if whole else ''} entries{where}"

    @property
    def rank_label(self) -> str:
        """What a row's position in `order` is."""
        return {"frequency": "frequency rank", "file": "line in the file"}.get(self.order_kind, "token-id order")


def make_table(key: str, source: str, words: Sequence[str], vectors: np.ndarray, freq: dict[str, int] | None = None,
               special: Sequence[bool] | None = None, order_note: str = "", subword: bool = False,
               notes: Iterable[str] = (), order_kind: str = "id") -> EmbeddingTable:
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
        order_note, order_kind = order_note or "by corpus frequency (the vocabulary's counts)", "frequency"
    is_special = np.array(special, dtype=bool)
    order = np.concatenate([rows[~is_special[rows]], rows[is_special[rows]]]) if len(rows) else rows
    index: dict[str, int] = {}
    for i, w in enumerate(words):
        index.setdefault(w, i)
    classes = tuple(word_class(w) if not s else None for w, s in zip(words, special))
    return EmbeddingTable(key, source, words, vectors, order.astype(np.int64), order_note or "row order", classes,
                          special, subword, tuple(notes), order_kind, index)


def table_sources(loaded: Any) -> dict[str, str]:
    """The embedding tables a model offers: source key -> label (the first is the default)."""
    try:
        return {key: t.label for key, t in loaded.adapter.tables().items()}
    except Unsupported:
        return {"input": "input embeddings"}


def embedding_table(loaded: Any, source: str = "input") -> EmbeddingTable:
    """The embedding table `source` of any LoadedModel (its adapter's `tables()`). Raises EmbeddingError."""
    mid = str(getattr(loaded, "id", "model"))
    try:
        tables = loaded.adapter.tables()
    except Unsupported as exc:
        raise EmbeddingError(str(exc)) from None
    t = tables.get(source) or next(iter(tables.values()))
    with torch.inference_mode():
        vectors = t.weight.detach().to("cpu", torch.float32).numpy().copy()
    if t.subword:
        note = "id order (a Hugging Face tokenizer stores no counts; special and [unused] entries last)"
    elif t.freq:
        note = ""
    else:  # a user's state dict (no model object) is in its vocabulary file's order
        why = ("the order of the vocabulary file" if getattr(loaded, "model", None) is None
               else "built-in vocabularies are built most frequent first")
        note = f"id order ({why})" if t.words and not t.words[0].startswith("<id ") else "row order (ids)"
    key = f"{mid}#{source}#{getattr(loaded, 'dtype', 'float32')}"
    return make_table(key, f"{mid} · {t.label}", t.words, vectors, t.freq, t.special, note, t.subword, t.notes)


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
                      "file order (such files are usually sorted most frequent first)", notes=notes, order_kind="file")


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


@dataclass(frozen=True)
class CosineTerms:
    """cos(u, v) = u·v / (|u| |v|) with its pieces."""

    dot: float
    norm_u: float
    norm_v: float
    cos: float


def cosine_terms(table: EmbeddingTable, r1: int, r2: int) -> CosineTerms:
    u, v = table.vectors[r1].astype(np.float64), table.vectors[r2].astype(np.float64)
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    dot = float(u @ v)
    return CosineTerms(dot, nu, nv, dot / (nu * nv) if nu and nv else 0.0)


@dataclass(frozen=True)
class Placed:
    """Typed words placed in a fitted projection: fit (word, coords) of rows among the fitted ones; transformed
    (word, coords) of rows placed by the fit's transform; unplaced: words a t-SNE fit cannot place."""

    fit: tuple[tuple[str, tuple[float, ...]], ...]
    transformed: tuple[tuple[str, tuple[float, ...]], ...]
    unplaced: tuple[str, ...]


def fitted_rows(table: EmbeddingTable, proj: Any, rows: np.ndarray) -> tuple[dict[int, int], list[str], list, bool]:
    """(row -> position in the fit, the fitted rows' words, their classes, whether any has a class), kept with the
    fit (per fit, not per keystroke)."""
    if "rows" not in proj.memo:
        classes = [table.classes[r] for r in rows]
        proj.memo["rows"] = ({int(r): i for i, r in enumerate(rows)}, [table.words[r] for r in rows], classes,
                             any(classes))
    return proj.memo["rows"]


def place(table: EmbeddingTable, proj: Any, rows: np.ndarray, located: Sequence[Located]) -> Placed:
    """Where the typed words sit in the fitted projection `proj` of table rows `rows`."""
    from explorer.projection import transform

    in_bg = fitted_rows(table, proj, rows)[0]
    found = [loc for loc in located if loc.found]
    fit = tuple((loc.word, tuple(float(v) for v in proj.coords[in_bg[loc.row]])) for loc in found if loc.row in in_bg)
    outside = [loc for loc in found if loc.row not in in_bg]
    if not outside:
        return Placed(fit, (), ())
    coords = transform(proj, table.vectors[[loc.row for loc in outside]])
    if coords is None:
        return Placed(fit, (), tuple(loc.word for loc in outside))
    return Placed(fit, tuple((loc.word, tuple(float(v) for v in xyz)) for loc, xyz in zip(outside, coords)), ())


def axis_coords(table: EmbeddingTable, rows: Sequence[int], x_pair: tuple[int, int],
                y_pair: tuple[int, int] | None = None) -> np.ndarray:
    """(N, 1 or 2) positions on axes a→b: (w − a)·(b − a) / |b − a|² (a at 0, b at 1). Raises EmbeddingError."""
    V = table.vectors
    if not len(rows):
        return np.zeros((0, 1 if y_pair is None else 2), dtype=np.float32)
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


def whole_words(table: EmbeddingTable) -> np.ndarray:
    """(V,) True for entries that are whole words: letters only, 2 characters or more, not special, and not a
    continuation piece ('##…' in WordPiece vocabularies; in vocabularies that mark word starts with ▁ or Ġ, an
    entry without the mark)."""
    if "whole" not in table.cache:
        words = table.words
        marks = [m for m in ("▁", "Ġ") if sum(w.startswith(m) for w in words) > 0.2 * len(words)]
        ok = np.zeros(len(words), dtype=bool)
        for i, (w, special) in enumerate(zip(words, table.special)):
            if special or w.startswith("##") or (marks and not w.startswith(marks[0])):
                continue
            core = w[len(marks[0]):] if marks else w
            ok[i] = len(core) >= 2 and core.isalpha()
        table.cache["whole"] = ok
    return table.cache["whole"]


def ranks(table: EmbeddingTable, rows: np.ndarray) -> np.ndarray:
    """(len(rows),) 1-based position of each row in `table.order` (its frequency rank, id order or file line)."""
    if "rank" not in table.cache:
        inv = np.empty(len(table), dtype=np.int64)
        inv[table.order] = np.arange(1, len(table) + 1)
        table.cache["rank"] = inv
    return table.cache["rank"][np.asarray(rows, dtype=np.int64)]


def background_rows(table: EmbeddingTable, n: int, whole: bool = False) -> np.ndarray:
    """The rows of the first n entries of `table.order` (specials last; whole=True: whole words only, see
    `whole_words`), clamped to what there is: (≤ n,)."""
    order = table.order[whole_words(table)[table.order]] if whole else table.order
    return order[: max(0, min(int(n), len(order)))]


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


LAYER_NAMES = ("embed", "blocks.*.resid_pre", "blocks.*.resid_post", "ln_final", "rnn.*.out", "encoder.embed",
               "encoder.rnn.*.out", "encoder.blocks.*.resid_pre", "encoder.blocks.*.resid_post", "encoder.ln_final")


def contextual(loaded: Any, text: str) -> ContextTrace:
    """Hidden states of every layer for `text`, read from the model's record: see the module docstring.
    Raises ContextError."""
    adapter = loaded.adapter
    mid = str(getattr(loaded, "id", "model"))
    enc = adapter.encode(text)
    if not len(enc):
        raise ContextError(" ".join(enc.notes) or "Type a sentence.")
    try:
        rec = adapter.run(enc, names=LAYER_NAMES)
    except Unsupported as exc:
        raise ContextError(str(exc)) from None
    p = "encoder." if adapter.is_encoder_decoder else ""
    if rec.layers(p + "blocks.{l}.resid_pre"):
        L = len(rec.layers(p + "blocks.{l}.resid_pre"))
        last = f"{p}blocks.{L - 1}.resid_post" if f"{p}blocks.{L - 1}.resid_post" in rec else p + "ln_final"
        keys = [f"{p}blocks.{layer}.resid_pre" for layer in range(L)] + [last]
        names = ["embeddings"] + [f"layer {layer}" for layer in range(1, L)] + \
            [f"layer {L}" + (" (after the final norm)" if last.endswith("ln_final") else "")]
        what = ("the encoder's hidden states: " if p else "hidden states: ") + \
            "layer 0 the embedding output (the residual stream entering block 1), layer l the output of block l"
    elif rec.layers(p + "rnn.{l}.out"):
        keys = [p + "embed"] + [f"{p}rnn.{layer}.out" for layer in rec.layers(p + "rnn.{l}.out")]
        cell = "GRU" if p else adapter.name.split(" ")[0]
        names = ["embedding"] + [f"{'encoder ' if p else ''}{cell} layer {i}" for i in range(1, len(keys))]
        what = ("the encoder: " if p else "") + "layer 0 the input embedding, layer l the output h_t of recurrent " \
            "layer l"
    else:
        raise ContextError(f"{mid} has one vector per word and no layers: there are no contextual embeddings. "
                           "Pick a language model or a transformer.")
    states = tuple(np.ascontiguousarray(rec[k], dtype=np.float32) for k in keys)
    return ContextTrace(mid, enc.tokens, enc.special or (False,) * len(enc), tuple(names), states, what, enc.notes)


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
