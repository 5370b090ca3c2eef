"""Tokens shown as the text they stand for, the same way in every chart, table, caption, menu and hover.

Tokenizers name their pieces in their own codes: byte-level BPE (GPT-2, Llama 3, SmolLM2) writes each byte as a
printable character (a space is `Ġ`, a newline `Ċ`, "é" is `Ã©`), SentencePiece writes a space as `▁` and bytes
as `<0xE2>`, WordPiece marks a piece that continues a word with `##`. `TokenText` reads which code a tokenizer uses
(its decoder when it says, else its vocabulary) and turns ids back into text:

- one mark for a space, `·` (as editors show whitespace), and `↵` for a newline, `⇥` for a tab, control pictures
  (␀ … ␟) for other control characters (`readable`);
- bytes are decoded into the characters they form; a token that holds part of a multi-byte character says so:
  in a sequence (`texts`) each token of the character shows it with its part, "😊(1/2)" and "😊(2/2)"; a token on
  its own (`text`, e.g. a top-k alternative) shows the bytes it holds, "‹F0 9F 98›";
- a tokenizer's decoding of ids (`decoded`, a generated text) shows bytes that form no character the same way,
  never as "�";
- WordPiece keeps its `##` (the piece is glued to the one before: the model never saw a space there);
- special and added tokens (`<|im_start|>`, `[CLS]`) are shown as they are named.
"""
from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence, cast

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import Tokenizer

SPACE, NEWLINE, TAB, EMPTY = "·", "↵", "⇥", "∅"
BASE = "◌"  # U+25CC, the base a combining mark is shown on when its token holds no letter before it
BYTES_OPEN, BYTES_CLOSE = "‹", "›"
_WHITE = {" ": SPACE, "\n": NEWLINE, "\t": TAB, "\r": "␍"}


_BREAKS = str.maketrans({"\n": NEWLINE, "\t": TAB, "\r": NEWLINE})


def marked_breaks(text: str) -> str:
    """`text` with its line breaks and tabs shown as the tokens show them (↵, ⇥) and its spaces kept: a sentence
    quoted whole in a title or a message."""
    return text.replace("\r\n", "\n").translate(_BREAKS)


def readable(text: str) -> str:
    """A token's text as shown: spaces `·`, newline `↵`, tab `⇥`, other control characters as control pictures
    (U+2400…), other invisible format characters as ‹U+XXXX›; the empty string as `∅`. Text already shown stays as it
    is: the spaces of a byte list ‹F0 9F› are the list's, not the token's."""
    if not text:
        return EMPTY
    if unicodedata.category(text[0])[0] == "M":  # a mark with no base in this token: drawn on a dotted circle, ◌́
        text = BASE + text
    if text.isprintable() and " " not in text:
        return text
    if BYTES_OPEN in text:
        parts = _BYTE_LIST.split(text)  # text, byte list, text, …
        return "".join(part if k % 2 else _marked(part) for k, part in enumerate(parts))
    return _marked(text)


_BYTE_LIST = re.compile(f"({BYTES_OPEN}[0-9A-F]{{2}}(?: [0-9A-F]{{2}})*{BYTES_CLOSE})")


def _marked(text: str) -> str:
    """`readable` of text that holds no byte list (the empty string stays empty)."""
    out = []
    for ch in text:
        if ch in _WHITE:
            out.append(_WHITE[ch])
        elif ord(ch) < 32:
            out.append(chr(0x2400 + ord(ch)))
        elif ord(ch) == 0x7F:
            out.append("␡")
        elif unicodedata.category(ch) == "Zs":
            out.append(SPACE)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(f"{BYTES_OPEN}U+{ord(ch):04X}{BYTES_CLOSE}")
        else:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's printable character -> byte map (the inverse of its bytes_to_unicode)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _bytes_of_hex(piece: str) -> bytes | None:
    """SentencePiece's byte-fallback piece `<0xE2>` -> b"\\xe2" (None for any other piece)."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            return None
    return None


def _hex(data: bytes) -> str:
    return BYTES_OPEN + " ".join(f"{b:02X}" for b in data) + BYTES_CLOSE


def _scheme_of_decoder(tokenizer: Tokenizer) -> str:
    """"byte-level", "sentencepiece", "wordpiece" or "" from a fast tokenizer's decoder (or a slow GPT-2's map)."""
    if getattr(tokenizer, "byte_decoder", None):
        return "byte-level"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None) if backend is not None else None
    text = repr(decoder) if decoder is not None else ""
    if "ByteLevel" in text:
        return "byte-level"
    if "Metaspace" in text or "▁" in text or "ByteFallback" in text:
        return "sentencepiece"
    if "WordPiece" in text:
        return "wordpiece"
    return ""


def _scheme_of_vocab(pieces: Sequence[str]) -> str:
    """The scheme read from the pieces themselves: markers on a fifth of them, and for byte-level BPE every
    character inside GPT-2's byte alphabet."""
    pieces = [p for p in pieces if not (p.startswith("<") and p.endswith(">"))]  # specials, byte-fallback <0xE2>
    if not pieces:
        return ""
    n = len(pieces)
    alphabet = byte_decoder()
    if sum("Ġ" in p for p in pieces) > 0.1 * n and sum(all(c in alphabet for c in p) for p in pieces) > 0.95 * n:
        return "byte-level"
    if sum(p.startswith("▁") for p in pieces) > 0.1 * n:
        return "sentencepiece"
    if sum(p.startswith("##") for p in pieces) > 0.05 * n:
        return "wordpiece"
    return ""


class Pieces(Protocol):
    """A vocabulary's tokens by id and its special ids (explorer.data.vocab.Vocab has them)."""

    @property
    def itos(self) -> Sequence[str]: ...
    @property
    def special_ids(self) -> Iterable[int]: ...


class TokenText:
    """The text of a vocabulary's ids (see the module docstring). pieces: (V,) each id's name in the tokenizer's code
    (None where it has none); special: ids shown as named. `scheme`: "byte-level", "sentencepiece", "wordpiece" or
    "plain"; `source`: where the scheme was read ("decoder" or "vocabulary")."""

    def __init__(self, pieces: Sequence[str | None], special: Iterable[int] = (), scheme: str = "") -> None:
        self.pieces = list(pieces)
        self.size = len(self.pieces)
        self.special = frozenset(int(i) for i in special)
        self.source = "decoder" if scheme else "vocabulary"
        self.scheme = scheme or _scheme_of_vocab([p for p in self.pieces if p is not None]) or "plain"
        self._alphabet = byte_decoder()
        self._cache: dict[int, bytes | str] = {}

    @classmethod
    def of_tokenizer(cls, tokenizer: Tokenizer) -> "TokenText":
        """A Hugging Face tokenizer's: its vocabulary, special and added tokens, and the scheme its decoder names."""
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        pieces: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
        for piece, i in vocab.items():
            if i >= 0:
                pieces[i] = piece
        named = set(getattr(tokenizer, "all_special_tokens", None) or ())
        try:
            named |= set(tokenizer.get_added_vocab())
        except Exception:  # slow tokenizers without added tokens
            pass
        return cls(pieces, (vocab[t] for t in named if t in vocab), _scheme_of_decoder(tokenizer))

    @classmethod
    def of_vocab(cls, vocab: Pieces) -> "TokenText":
        """An explorer Vocab's (built-in words, a user's vocab.json or tokenizer.json pieces): scheme read from the
        pieces."""
        return cls(list(vocab.itos), vocab.special_ids)

    def piece(self, i: int) -> str | None:
        return self.pieces[i] if 0 <= i < self.size else None

    def raw(self, i: int) -> bytes | str:
        """What id i stands for: bytes for a piece of text, a str for a special token or a piece that is shown as
        written (WordPiece, plain vocabularies, ids the tokenizer lacks: `#id`)."""
        cached = self._cache.get(i)
        if cached is not None:
            return cached
        piece = self.piece(i)
        value: bytes | str
        if piece is None:
            value = f"#{i}"
        elif i in self.special:
            value = piece
        elif self.scheme == "byte-level" and all(c in self._alphabet for c in piece):
            value = bytes(self._alphabet[c] for c in piece)
        elif self.scheme == "sentencepiece":
            value = _bytes_of_hex(piece) or piece.replace("▁", " ").encode("utf-8")
        else:
            value = piece
        self._cache[i] = value
        return value

    def text(self, i: int) -> str:
        """The text of id i on its own (a top-k alternative, a menu entry): bytes that do not form a whole
        character are shown as ‹hex›."""
        value = self.raw(int(i))
        return readable(value) if isinstance(value, str) else _decode_alone(value)

    def texts(self, ids: Sequence[int]) -> list[str]:
        """The text of each id of a sequence: a character whose bytes are spread over several tokens is shown in
        each of them with its part, "é(1/2)", "é(2/2)"."""
        values = [self.raw(int(i)) for i in ids]
        out: list[str] = [""] * len(values)
        run: list[int] = []
        for k, value in enumerate(values + [""]):
            if isinstance(value, bytes):
                run.append(k)
                continue
            if run:
                for j, shown in zip(run, _decode_run([values[j] for j in run])):  # type: ignore[misc]
                    out[j] = shown
                run = []
            if k < len(values):
                out[k] = readable(value)
        return out

    def decoded(self, ids: Sequence[int], text: str) -> str:
        """`text`, a tokenizer's decoding of `ids`, with each "�" that stands for bytes forming no whole character (a
        text ending inside a character, a character cut by another token) shown as those bytes, ‹E3 81›, as a token
        on its own shows them; a "�" decoded from the bytes of that character stays."""
        units: list[str | bytes] = []  # the ids' own text: characters, and stretches of bytes that form none
        run: list[bytes] = []
        for value in [self.raw(int(i)) for i in ids] + [""]:
            if isinstance(value, bytes):
                run.append(value)
                continue
            for part in _invalid_spans(b"".join(run)) + [value]:
                if isinstance(part, str):
                    units += part
                elif units and isinstance(units[-1], bytes):
                    units[-1] += part
                else:
                    units.append(part)
            run = []
        if not any(isinstance(u, bytes) for u in units):
            return text
        lossy = "".join("\ufffd" if isinstance(u, bytes) else u for u in units)  # what a decoder writes for them
        out: list[str] = []
        # a region: what the two texts hold since the last character they agree on
        said, mine = "", cast(list[str | bytes], [])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, text, lossy, autojunk=False).get_opcodes():
            if tag != "equal":
                said, mine = said + text[i1:i2], mine + units[j1:j2]
                continue
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if text[i] == "\ufffd":  # the bytes of a character, or bytes that form none: part of a region
                    said, mine = said + text[i], mine + [units[j]]
                    continue
                out.append(_region(said, mine, not out) + text[i])
                said, mine = "", []
        return "".join(out) + _region(said, mine, not out)


def _region(said: str, mine: list[str | bytes], first: bool) -> str:
    """Where a tokenizer's text and the ids' own text differ: the tokenizer's (its spaces, its clean-up) unless it
    holds a "�" (a decoder may write one per byte, or one per run of byte tokens) or the ids hold bytes that form no
    character: then the ids' text, those bytes as ‹hex› (at the start of the text without the space a decoder drops)."""
    if "\ufffd" not in said and not any(isinstance(u, bytes) for u in mine):
        return said
    shown = "".join(_hex(u) if isinstance(u, bytes) else u for u in mine)
    return shown.lstrip() if first and not said[:1].isspace() else shown


def _invalid_spans(data: bytes) -> list[str | bytes]:
    """Bytes as text, with each stretch that forms no character (what a decoder replaces with one "�") as bytes."""
    out: list[str | bytes] = []
    while data:
        try:
            out.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            out += [data[:exc.start].decode("utf-8"), data[exc.start:exc.end]]
            data = data[exc.end:]
    return out


def _decode_alone(data: bytes) -> str:
    """Bytes of one token: its whole characters as text, any leading or trailing part of a character as ‹hex›."""
    try:
        return readable(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    start = 0
    while start < len(data) and start < 3 and (data[start] & 0xC0) == 0x80:  # continuation bytes of a char before
        start += 1
    end = len(data)
    for back in range(1, min(4, len(data) - start) + 1):  # an incomplete character at the end
        lead = data[end - back]
        if (lead & 0xC0) != 0x80:
            need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
            if need > back:
                end -= back
            break
    try:
        middle = data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return _hex(data)
    head = _hex(data[:start]) if start else ""
    tail = _hex(data[end:]) if end < len(data) else ""
    return head + (readable(middle) if middle else "") + tail


def _decode_run(parts: list[bytes]) -> list[str]:
    """The shown text of consecutive byte tokens: whole characters as text; a character spread over n tokens
    appears in each of them as "c(k/n)"; bytes that form no character as ‹hex›."""
    owner: list[int] = []  # the token of each byte
    for k, part in enumerate(parts):
        owner += [k] * len(part)
    data = b"".join(parts)
    shown = [""] * len(parts)
    pos = 0
    while pos < len(data):
        lead = data[pos]
        need = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else \
            4 if lead >> 3 == 0b11110 else 0
        chunk = data[pos:pos + need] if need else b""
        try:
            ch = chunk.decode("utf-8") if need else None
        except UnicodeDecodeError:
            ch = None
        if ch is None:  # a stray byte: shown as hex in its token
            shown[owner[pos]] += _hex(data[pos:pos + 1])
            pos += 1
            continue
        tokens = sorted(set(owner[pos:pos + need]))
        if len(tokens) == 1:
            shown[tokens[0]] += readable(ch)
        else:
            for n, k in enumerate(tokens, 1):
                shown[k] += f"{readable(ch)}({n}/{len(tokens)})"
        pos += need
    return [s.replace(BYTES_CLOSE + BYTES_OPEN, " ") or EMPTY for s in shown]  # ‹F0›‹9F› -> ‹F0 9F›
