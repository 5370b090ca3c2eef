"""Word embeddings: tables of vectors from any model or a text file, looked up the way the model reads words,
neighbours, analogies and two-axis views.

Tables (`EmbeddingTable`): the rows of a model's input embedding matrix with the token of each row
  builtin:word2vec   SkipGram.in_embed (v, the word vectors; Mikolov et al. 2013)
  built-in LMs       RNNLanguageModel.embedding, tiny GPT `wte`, seq2seq `src_embedding` / `tgt_embedding`
  Hugging Face       model.get_input_embeddings() with the tokenizer's pieces (id order)
  state dicts        the 2-D tensor named like an embedding (embed / wte / emb), with the vocab.json if given
  text files         "word v1 v2 ... vD" per line (GloVe / word2vec text format, optional "N D" header line), parsed
                     by explorer.files.vector_text (`text_file_table`)

Similarity is cosine: cos(u, v) = u·v / (|u| |v|). Analogies use 3CosAdd (Mikolov et al. 2013; Levy & Goldberg
2014): answer = argmax_x cos(x, â − b̂ + ĉ) over x ∉ {a, b, c}, with x̂ = x / |x|. Two-axis views (as in whatlies)
place a word w on the axis a→b at (w − a)·(b − a) / |b − a|², so a sits at 0 and b at 1.

Typed words are looked up the way the model reads them in a sentence (`locate`): in byte-level BPE and SentencePiece
vocabularies the entry of the word after a space ("Ġking", shown "·king"), found with the model's own tokenizer.
Contextual embeddings (one vector per token per layer) are explorer.probes.contextual_embeddings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Iterable, Sequence, cast

import numpy as np
import torch

from explorer.adapters.protocols import Loaded
from explorer.adapters.base import Unsupported
from explorer.data.english import word_class
from explorer.files.vector_text import MAX_FILE_ROWS, EmbeddingError, parse_text_embeddings

if TYPE_CHECKING:
    from explorer.projections.reduce import Projection

MAX_TYPED_WORDS = 64
MARKED = ("byte-level", "sentencepiece")  # vocabularies with an entry for a word after a space ("Ġking", "▁king")
SPACE_MARKS = ("·", "Ġ", "▁")  # that space: as shown (explorer.text.token_text), in byte-level BPE, in SentencePiece


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
    scheme: str = "plain"
    index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    cache: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)  # derived arrays, memoised

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

    @property
    def row_label(self) -> str:
        """What a row number is called: a model's token id, or a row of a file."""
        return "row" if self.order_kind == "file" else "id"

    @property
    def marked(self) -> bool:
        """Whether a word after a space is its own entry, shown with a leading "·" (byte-level BPE, SentencePiece)."""
        return self.scheme in MARKED


def infer_scheme(words: Sequence[str]) -> str:
    """The scheme of a table read from its entries (when no tokenizer says): a space mark on a tenth of them
    (byte-level or SentencePiece: the same rules here), "##" on a twentieth (WordPiece), else words."""
    n = max(1, len(words))
    if sum(w[:1] in SPACE_MARKS for w in words) > 0.1 * n:
        return "byte-level" if sum(w[:1] == "Ġ" for w in words) > 0.1 * n else "sentencepiece"
    if sum(w.startswith("##") for w in words) > 0.05 * n:
        return "wordpiece"
    return "plain"


def make_table(key: str, source: str, words: Sequence[str], vectors: np.ndarray, freq: dict[str, int] | None = None,
               special: Sequence[bool] | None = None, order_note: str = "", subword: bool = False,
               notes: Iterable[str] = (), order_kind: str = "id", scheme: str = "") -> EmbeddingTable:
    """Build an EmbeddingTable: frequency order from `freq` (else row order), specials last, classes filled in;
    scheme: the vocabulary's (explorer.text.token_text), read from the entries when not given."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise EmbeddingError(f"{source}: an embedding table must be 2-D (rows × dimensions), "
                             f"got shape {vectors.shape}.")
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
                          special, subword, tuple(notes), order_kind, scheme or infer_scheme(words), index)


def table_sources(loaded: Loaded) -> dict[str, str]:
    """The embedding tables a model offers: source key -> label (the first is the default)."""
    try:
        if (has := loaded.caps.tables) is not None:
            return {key: t.label for key, t in has.tables().items()}
    except Unsupported:
        pass
    return {"input": "input embeddings"}


def embedding_table(loaded: Loaded, source: str = "input") -> EmbeddingTable:
    """The embedding table `source` of any LoadedModel (its adapter's `tables()`). Raises EmbeddingError."""
    mid = str(getattr(loaded, "id", "model"))
    if (has := loaded.caps.tables) is None:
        raise EmbeddingError(f"{mid} has no embedding table this view can read.")
    try:
        tables = has.tables()
    except Unsupported as exc:
        raise EmbeddingError(str(exc)) from None
    t = tables.get(source) or next(iter(tables.values()))
    with torch.inference_mode():
        vectors = t.weight.detach().to("cpu", torch.float32).numpy().copy()
    order_kind = "frequency" if t.ranked else "id"
    if t.ranked:
        note = "most frequent first (the published order of the table)"
    elif t.subword:
        note = "id order (a Hugging Face tokenizer stores no counts; special and [unused] entries last)"
    elif t.freq:
        note = ""
    else:  # a user's state dict (no model object) is in its vocabulary file's order
        why = ("the order of the vocabulary file" if getattr(loaded, "model", None) is None
               else "built-in vocabularies are built most frequent first")
        note = f"id order ({why})" if t.words and not t.words[0].startswith("<id ") else "row order (ids)"
    key = f"{mid}#{source}#{getattr(loaded, 'dtype', 'float32')}"
    display = getattr(loaded.adapter, "display", None)
    scheme = str(getattr(display, "scheme", "") or "") if source == "input" else ""
    return make_table(key, f"{mid} · {t.label}", t.words, vectors, t.freq, t.special, note, t.subword, t.notes,
                      order_kind=order_kind, scheme=scheme if scheme in (*MARKED, "wordpiece", "plain") else "")


def text_file_table(data: bytes, name: str = "upload", max_rows: int = MAX_FILE_ROWS) -> EmbeddingTable:
    """The table of a vector text file (explorer.files.vector_text.parse_text_embeddings), rows in file order;
    key "file:" + a hash of the bytes. Raises EmbeddingFileError (an EmbeddingError)."""
    f = parse_text_embeddings(data, name, max_rows)
    return make_table(f.key, f.source, f.words, f.vectors, None, None,
                      "file order (such files are usually sorted most frequent first)", notes=f.notes,
                      order_kind="file")



# -------------------------------------------------------------------------------------- typed words
CONTEXT_WORD = "the"  # read before a typed word: what follows it is the word as the model reads it in a sentence


@dataclass(frozen=True)
class Located:
    """A typed word looked up the way the model reads it (see `locate`).

    row: the table row used (None: no single entry); entry: that entry as shown; how: "sentence" (the word as read
    after a space inside a sentence, "·king"), "start" (as read at the start of a text: its in-sentence form is not
    one entry), "exact", "lowercased", or "piece" (the tokenizer reads it as that one entry, e.g. accents stripped).
    pieces: what the model reads for the word inside a sentence, as shown (several entries when it splits it);
    start: the same at the start of a text, where it differs from `pieces`; start_row: the row of that form when it
    is one entry."""

    word: str
    row: int | None
    entry: str | None = None
    pieces: tuple[str, ...] = ()
    how: str = ""
    start: tuple[str, ...] = ()
    start_row: int | None = None

    @property
    def found(self) -> bool:
        return self.row is not None

    @property
    def split(self) -> bool:
        """Whether the model reads the word as several pieces inside a sentence."""
        return len(self.pieces) > 1


def typed_words(text: str, limit: int = MAX_TYPED_WORDS) -> list[str]:
    """Distinct words of `text` as typed, in order (split on whitespace, commas and semicolons, outer punctuation and
    quotes stripped, case and every other character kept: each word is then read by the model's own tokenizer)."""
    from explorer.data.vocab import clean_text

    out: list[str] = []
    for raw in re.split(r"[\s,;]+", text or ""):
        word = raw.strip(".!?:;\"()[]{}“”‘’«»") or raw
        if word and word not in out and clean_text(word).strip():  # a "word" of only invisible characters is none
            out.append(word)
        if len(out) >= limit:
            break
    return out


class _Reader:
    """How a model reads typed text: its tokenizer (special tokens left out) or, without one, its adapter's
    `encode`; tokens shown with the adapter's display strings; ids mapped to table rows."""

    def __init__(self, loaded: Loaded, table: EmbeddingTable) -> None:
        self.adapter = loaded.adapter
        self.tokenizer = getattr(loaded, "tokenizer", None)
        self.table = table

    def ids(self, text: str) -> list[int]:
        try:
            if self.tokenizer is not None:
                return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]
            enc = self.adapter.encode(text)
            special = enc.special or (False,) * len(enc.ids)
            return [int(i) for i, s in zip(enc.ids, special) if not s]
        except Exception:  # a tokenizer that cannot read this text: no reading, the word is looked up as typed
            return []

    def in_sentence(self, word: str) -> list[int]:
        """The ids the model reads for `word` inside a sentence: what follows CONTEXT_WORD and a space ([] when
        the word cannot be told apart from the word before it)."""
        before, full = self.ids(CONTEXT_WORD), self.ids(f"{CONTEXT_WORD} {word}")
        return full[len(before):] if before and full[:len(before)] == before else []

    def shown(self, ids: Sequence[int]) -> tuple[str, ...]:
        if not ids:
            return ()
        try:
            return tuple(self.adapter.sequence_strings(list(ids)))
        except Exception:
            return tuple(f"#{i}" for i in ids)

    def row(self, ids: Sequence[int]) -> int | None:
        """The table row of a one-id reading (None for several ids, a special entry, or an id the table lacks)."""
        if len(ids) != 1:
            return None
        i, table = int(ids[0]), self.table
        try:
            name = self.adapter.token_strings([i])[0]
        except Exception:
            return None
        row = i if 0 <= i < len(table) and table.words[i] == name else table.index.get(name)
        return row if row is not None and not table.special[row] else None


def _reader(table: EmbeddingTable, loaded: Loaded | None) -> _Reader | None:
    """The model's reader when the table is one of its own and has a tokenizer's pieces (else None: a file, or
    words looked up as typed)."""
    if loaded is None or getattr(loaded, "adapter", None) is None or table.scheme == "plain":
        return None
    return _Reader(loaded, table)


def _as_typed(table: EmbeddingTable, word: str) -> tuple[int, str] | None:
    """(row, how) of the word exactly or lowercased."""
    for how, candidate in (("exact", word), ("lowercased", word.lower())):
        row = table.index.get(candidate)
        if row is not None:
            return row, how
    return None


def locate(table: EmbeddingTable, word: str, loaded: Loaded | None = None) -> Located:
    """Find `word` in `table` the way the model `loaded` reads it in a sentence.

    Byte-level BPE and SentencePiece vocabularies have an entry for a word after a space ("Ġking", "▁king"; shown
    "·king") besides the word at the start of a text ("king"): the word is read as the model's own tokenizer reads
    it after a preceding word (CONTEXT_WORD + " " + word, minus what CONTEXT_WORD alone gives), then, when that is
    not one entry, as at the start of a text; failing both, as typed. WordPiece and word vocabularies: the word
    exactly, then lowercased, then (WordPiece) the tokenizer's reading when it is one entry (e.g. accents
    stripped). An uploaded file (loaded None): exactly, then lowercased. `pieces` says how a sentence splits it."""
    reader = _reader(table, loaded)
    if reader is not None and table.marked:
        sentence, start = reader.in_sentence(word), reader.ids(word)
        shown, shown_start = reader.shown(sentence), reader.shown(start)
        other = shown_start if start != sentence else ()
        other_row = reader.row(start) if other else None
        row = reader.row(sentence)
        if row is not None:
            return Located(word, row, table.words[row], shown, "sentence", other, other_row)
        row = reader.row(start)
        if row is not None:
            return Located(word, row, table.words[row], shown, "start", shown_start, row)
        typed = _as_typed(table, word)  # an entry typed as shown ("·king") or as named ("<|im_start|>")
        if typed is not None:
            return Located(word, typed[0], table.words[typed[0]], (table.words[typed[0]],), typed[1])
        return Located(word, None, None, shown or shown_start, "", other, other_row)
    typed = _as_typed(table, word)
    if typed is not None:
        return Located(word, typed[0], table.words[typed[0]], (table.words[typed[0]],), typed[1])
    if reader is None:
        return Located(word, None)
    sentence = reader.in_sentence(word) or reader.ids(word)
    row = reader.row(sentence)
    shown = reader.shown(sentence)
    if row is not None:
        return Located(word, row, table.words[row], shown, "piece")
    return Located(word, None, None, shown)


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _pieces(pieces: Sequence[str], n: int = 8) -> str:
    return " + ".join(_short(p, 20) for p in pieces[:n]) + (" + …" if len(pieces) > n else "")


def read_as(loc: Located, table: EmbeddingTable) -> str:
    """Which entry a found word was read as, e.g. "‘king’ → ·king, id 4197 (after a space, as inside a sentence);
    at the start of a text ‘king’ is king, id 644". Bounded: 40 characters of the word, 8 pieces."""
    word, label = f"‘{_short(loc.word)}’", table.row_label
    line = f"{word} → {_short(loc.entry or '')}, {label} {loc.row}"
    if loc.how == "sentence":
        line += " (after a space, as inside a sentence)"
        if loc.start and loc.start_row is not None:
            line += f"; at the start of a text {word} is {_short(loc.start[0])}, {label} {loc.start_row}"
        elif len(loc.start) > 1:
            line += f"; at the start of a text it is split into {len(loc.start)} pieces: {_pieces(loc.start)}"
    elif loc.how == "start":
        line += " (as at the start of a text)"
        if loc.split:
            line += f"; inside a sentence, after a space, it is split into {len(loc.pieces)} pieces: " \
                    f"{_pieces(loc.pieces)}, so this entry is not what the model reads there"
    elif loc.how == "lowercased":
        line += " (lowercased: the entry as typed is not in the table)"
    elif loc.how == "piece":
        line += " (the tokenizer's reading of it)"
    return line


def highlighted(table: EmbeddingTable, text: str, loaded: Loaded | None) -> tuple[list[Located], list[str]]:
    """The typed words of `text` that are entries of `table` (at most MAX_TYPED_WORDS distinct words are read), and
    what the view says about the rest: the words not in the table, and the words past the limit."""
    typed = typed_words(text, MAX_TYPED_WORDS + 1)
    located = [locate(table, w, loaded) for w in typed[:MAX_TYPED_WORDS]]
    missing = [loc for loc in located if not loc.found]
    notes = [not_found_message(missing, table)] if missing else []
    if len(typed) > MAX_TYPED_WORDS:
        notes.append(f"Only the first {MAX_TYPED_WORDS} distinct words are highlighted.")
    return [loc for loc in located if loc.found], notes


def not_found_message(missing: Sequence[Located], table: EmbeddingTable) -> str:
    """One sentence for the words that are not in the table, with the pieces the model reads instead (as shown).

    Bounded whatever was typed: at most 12 words of 40 characters, each with at most 8 pieces."""
    parts = []
    for loc in missing[:12]:
        if loc.split:
            parts.append(f"'{_short(loc.word)}' (split in a sentence into {len(loc.pieces)} pieces: "
                         f"{_pieces(loc.pieces)})")
        else:
            parts.append(f"'{_short(loc.word)}'")
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
    return np.asarray(table.cache["unit"])


def _top(table: EmbeddingTable, target: np.ndarray, k: int, exclude: Iterable[int]) -> Ranked:
    """The k rows with the largest cosine with `target` (excluded and special rows left out), ties by row: one
    float32 product with the unit rows and a top-k (torch.topk: faster than numpy's argpartition on 400,000 rows)."""
    sims = unit_table(table) @ _unit(np.asarray(target, dtype=np.float32)).astype(np.float32)
    if "special_rows" not in table.cache:
        table.cache["special_rows"] = np.flatnonzero(np.array(table.special, dtype=bool))
    out = np.union1d(np.asarray(list(set(exclude)), dtype=np.int64), table.cache["special_rows"])
    sims[out] = -np.inf
    n = len(sims)
    k = max(0, min(int(k), n - len(out)))
    part = torch.topk(torch.from_numpy(sims), k).indices.numpy() if k else np.zeros(0, dtype=np.int64)
    rows = part[np.lexsort((part, -sims[part]))]
    return Ranked(tuple(int(r) for r in rows), tuple(table.words[r] for r in rows), tuple(float(sims[r]) for r in rows))


def neighbours(table: EmbeddingTable, row: int, k: int = 10) -> Ranked:
    """The k entries with the highest cosine similarity to entry `row` (itself and special entries left out)."""
    return _top(table, table.vectors[row], k, [row])


def cosines_of(table: EmbeddingTable, row: int, entries: Sequence[str]) -> np.ndarray:
    """cos(entry `row`, each of `entries`) in `table`, NaN for an entry the table lacks (entries: another table's
    neighbour list, e.g. another training step's): (len(entries),) float64."""
    index = table.cache.get("index")
    if index is None:
        index = table.cache["index"] = {w: i for i, w in enumerate(table.words)}
    return np.array([cosine(table, row, index[e]) if e in index else np.nan for e in entries], dtype=np.float64)


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


# ------------------------------------------------------------------------------------------- what to notice
MAX_COHESION_ROWS = 2000  # the classed rows (of the fitted ones, in order) whose pairwise cosines are averaged


@dataclass(frozen=True)
class Cohesion:
    """How close words of one kind sit: `within` the mean cosine of two different words of one class (or of the
    given words), `between` the mean cosine of two words of different classes (or of random pairs of the fitted
    rows); `words` the words used (given words found in the table, as entries), `classes` how many classes."""

    within: float
    between: float
    words: tuple[str, ...] = ()
    classes: int = 0


def class_cohesion(table: EmbeddingTable, rows: np.ndarray) -> Cohesion | None:
    """Cohesion of the word classes among `rows` (the chart's colours), or None when fewer than two classes are
    there (a subword vocabulary, an uploaded file)."""
    classed = [int(r) for r in rows if table.classes[int(r)]][:MAX_COHESION_ROWS]
    names = np.array([table.classes[r] for r in classed])
    if len(set(names.tolist())) < 2:
        return None
    U = unit_table(table)[classed].astype(np.float64)
    S = U @ U.T
    same = names[:, None] == names[None, :]
    np.fill_diagonal(same, False)
    return Cohesion(float(S[same].mean()), float(S[names[:, None] != names[None, :]].mean()),
                    classes=len(set(names.tolist())))


def word_cohesion(table: EmbeddingTable, words: Sequence[str], rows: np.ndarray, loaded: Loaded | None = None,
                  pairs: int = 2000) -> Cohesion | None:
    """Cohesion of `words` as the model reads them (their mean pairwise cosine) against `pairs` random pairs of
    `rows` (seeded), or None when fewer than two of them are in the table."""
    found = [loc for loc in (locate(table, w, loaded) for w in words) if loc.found]
    found = list({loc.row: loc for loc in found}.values())
    if len(found) < 2 or len(rows) < 2:
        return None
    U = unit_table(table)
    W = U[[int(loc.row) for loc in found if loc.row is not None]].astype(np.float64)
    S = W @ W.T
    rng = np.random.default_rng(0)
    a, b = rng.choice(rows, pairs), rng.choice(rows, pairs)
    a, b = a[a != b], b[a != b]
    random = float((U[a].astype(np.float64) * U[b].astype(np.float64)).sum(1).mean())
    return Cohesion(float(S[~np.eye(len(found), dtype=bool)].mean()), random, tuple(str(loc.entry) for loc in found))


@dataclass(frozen=True)
class AnalogyCheck:
    """a − b + c on the table: `first` the top answer (as an entry), `rank` the expected answer's rank among the
    answers (1 = first; None: not among the first `k`)."""

    first: str
    rank: int | None
    k: int


def analogy_check(table: EmbeddingTable, words: Sequence[str], loaded: Loaded | None = None,
                  k: int = 100) -> AnalogyCheck | None:
    """`words` = (a, b, c, expected): where the expected answer of a − b + c ranks (None when one of the four is not
    in the table)."""
    rows = [locate(table, w, loaded).row for w in words]
    if any(r is None for r in rows) or len(rows) != 4 or len(table) < 4:
        return None
    a, b, c, expected = (int(r) for r in rows if r is not None)
    ranked = analogy(table, a, b, c, k)
    rank = ranked.rows.index(expected) + 1 if expected in ranked.rows else None
    return AnalogyCheck(ranked.words[0] if ranked.words else "", rank, k)


@dataclass(frozen=True)
class Placed:
    """Typed words placed in a fitted projection: fit (word, coords) of rows among the fitted ones; transformed
    (word, coords) of rows placed by the fit's transform; unplaced: words a t-SNE fit cannot place."""

    fit: tuple[tuple[str, tuple[float, ...]], ...]
    transformed: tuple[tuple[str, tuple[float, ...]], ...]
    unplaced: tuple[str, ...]


FittedRows = tuple[dict[int, int], list[str], list[str | None], bool]


def fitted_rows(table: EmbeddingTable, proj: Projection, rows: np.ndarray) -> FittedRows:
    """(row -> position in the fit, the fitted rows' words, their classes, whether any has a class), kept with the
    fit (per fit, not per keystroke)."""
    if "rows" not in proj.memo:
        classes = [table.classes[r] for r in rows]
        proj.memo["rows"] = ({int(r): i for i, r in enumerate(rows)}, [table.words[r] for r in rows], classes,
                             any(classes))
    return cast(FittedRows, proj.memo["rows"])


def place(table: EmbeddingTable, proj: Projection, rows: np.ndarray, located: Sequence[Located]) -> Placed:
    """Where the typed words sit in the fitted projection `proj` of table rows `rows`."""
    from explorer.projections.reduce import transform

    in_bg = fitted_rows(table, proj, rows)[0]
    found = [loc for loc in located if loc.found]
    fit = tuple((loc.word, tuple(float(v) for v in proj.coords[in_bg[loc.row]])) for loc in found if loc.row in in_bg)
    outside = [loc for loc in found if loc.row not in in_bg]
    if not outside:
        return Placed(fit, (), ())
    coords = transform(proj, table.vectors[[int(loc.row) for loc in outside if loc.row is not None]])
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


def is_whole_word(word: str, scheme: str) -> bool:
    """Whether a (non-special) entry is a whole word, by the vocabulary's scheme: byte-level BPE and SentencePiece
    "·" (a word after a space; also written "Ġ" / "▁") followed by 2 or more letters only, so word-internal pieces,
    runs of spaces and punctuation are out; WordPiece an entry without "##" of 2 or more letters only; word
    vocabularies 2 or more letters only."""
    if scheme in MARKED:
        return word[:1] in SPACE_MARKS and len(word) >= 3 and word[1:].isalpha()
    return len(word) >= 2 and word.isalpha()  # "##" is not a letter: WordPiece continuation pieces are out


def whole_words(table: EmbeddingTable) -> np.ndarray:
    """(V,) True for entries that are whole words (`is_whole_word` by the table's scheme; special entries never)."""
    if "whole" not in table.cache:
        table.cache["whole"] = np.array([not s and is_whole_word(w, table.scheme)
                                         for w, s in zip(table.words, table.special)], dtype=bool)
    return np.asarray(table.cache["whole"])


def ranks(table: EmbeddingTable, rows: np.ndarray) -> np.ndarray:
    """(len(rows),) 1-based position of each row in `table.order` (its frequency rank, id order or file line)."""
    if "rank" not in table.cache:
        inv = np.empty(len(table), dtype=np.int64)
        inv[table.order] = np.arange(1, len(table) + 1)
        table.cache["rank"] = inv
    return np.asarray(table.cache["rank"][np.asarray(rows, dtype=np.int64)])


def background_rows(table: EmbeddingTable, n: int, whole: bool = False) -> np.ndarray:
    """The rows of the first n entries of `table.order` (specials last; whole=True: whole words only, see
    `whole_words`), clamped to what there is: (≤ n,)."""
    order = table.order[whole_words(table)[table.order]] if whole else table.order
    return order[: max(0, min(int(n), len(order)))]


__all__ = [
    "EmbeddingTable", "EmbeddingError", "make_table", "infer_scheme", "table_sources", "embedding_table",
    "text_file_table", "Located", "typed_words", "locate", "read_as", "not_found_message", "unit_vectors",
    "unit_table", "Ranked", "neighbours", "cosine", "analogy", "axis_coords", "is_whole_word", "whole_words",
    "background_rows",
]
