"""Uploaded tokenizer.json files: no regex of a file runs unless it is a known family's, and a crash of the Rust
library (a panic, a BaseException) is that upload's error message, never a dead session thread."""
from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import threading
import time

import pytest
from safetensors.torch import save
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from explorer.data import tokenizer_safety as TS
from explorer.data.vocab_files import tokenizer_vocab
from explorer.files.safe_load import CorruptFileError
from explorer.loading.uploads import forget_upload, register_upload
from hostile import lstm_state_dict
from timing import scaled

WORDS = ["[UNK]", "the", "dog", "sat", "on", "mat", "a", "b"]


def _tokenizer(pre_tokenizer=None, normalizer: dict | None = None) -> dict:
    """A WordLevel tokenizer.json (parsed) over WORDS, with the given pre-tokenizer / normalizer."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizer if pre_tokenizer is not None else pre_tokenizers.Whitespace()
    obj = json.loads(tok.to_str())
    if normalizer is not None:
        obj["normalizer"] = normalizer
    return obj


def _split_pre(pattern: str):
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated")


def _files(tokenizer: dict) -> list[tuple[str, bytes]]:
    weights = save({k: v.contiguous() for k, v in lstm_state_dict(vocab_size=len(WORDS)).items()})
    return [("lstm.safetensors", weights), ("tokenizer.json", json.dumps(tokenizer).encode())]


class _Ticker:
    """A thread that counts while the main thread works: it only advances when the interpreter lock is free."""

    def __enter__(self):
        self.ticks, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            self.ticks += 1
            time.sleep(0.001)

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


BACKTRACKING = r"(\w*)*\s"  # nested quantifiers: exponential backtracking on "aaa…a!"


def test_the_backtracking_pattern_is_real(tmp_path) -> None:
    """The library run on its own (in a child process) panics on it with 400 characters: the payload is real."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_tokenizer(_split_pre(BACKTRACKING))))
    code = f"from tokenizers import Tokenizer; Tokenizer.from_file({str(path)!r}).encode('a' * 400 + '!')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"RUST_BACKTRACE": "0"})
    assert out.returncode != 0 and "retry-limit-in-match over" in out.stderr


def test_backtracking_regex_upload_is_refused_before_the_library_sees_it(monkeypatch) -> None:
    def never(*args, **kwargs):
        raise AssertionError("Tokenizer.from_str was called on an unknown regex")

    monkeypatch.setattr(Tokenizer, "from_str", never)
    obj = _tokenizer(_split_pre(BACKTRACKING))
    with _Ticker() as ticker:
        start = time.perf_counter()
        with pytest.raises(CorruptFileError) as info:
            register_upload(_files(obj))
        elapsed = time.perf_counter() - start
    msg = str(info.value)
    assert msg.startswith("'tokenizer.json' is not a valid vocabulary: it holds a regular expression "
                          "(pre_tokenizer.pattern) that is not one of the patterns of known tokenizer families "
                          "(GPT-2 byte-level BPE, Llama 3 / tiktoken cl100k, Qwen 2,")
    assert "stalls every session" in msg and "Use a built-in pre-tokenizer (ByteLevel, Whitespace, Metaspace)" in msg
    assert BACKTRACKING not in msg  # the file's pattern is not echoed to the page
    assert elapsed < scaled(1.0) and ticker.ticks > 0


@pytest.mark.parametrize("where, obj", [
    ("normalizer.pattern",
     _tokenizer(normalizer={"type": "Replace", "pattern": {"Regex": "(a|aa)+$"}, "content": " "})),
    ("pre_tokenizer.pretokenizers[1].pattern",
     _tokenizer(pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), _split_pre("(a+)+$")]))),
    ("decoder.pattern",
     {**_tokenizer(), "decoder": {"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": ""}}),
], ids=["normalizer", "sequence", "decoder"])
def test_every_place_the_library_compiles_a_regex_is_checked(where: str, obj: dict) -> None:
    with pytest.raises(TS.TokenizerError, match=re.escape(f"regular expression ({where}) that is not one of")):
        tokenizer_vocab(obj)


def test_literal_patterns_and_known_family_patterns_are_read_and_split_as_the_library_does() -> None:
    llama3 = TS.FAMILY_PATTERNS["Llama 3 / tiktoken cl100k"]
    obj = _tokenizer(pre_tokenizers.Sequence([_split_pre(llama3), pre_tokenizers.WhitespaceSplit()]),
                     normalizer={"type": "Replace", "pattern": {"String": "  "}, "content": " "})
    vocab = tokenizer_vocab(obj)
    tok = Tokenizer.from_str(json.dumps(obj))
    text = "the dog  sat on a zebra"
    assert [i for _, i in vocab.splitter(text)] == [i if i != 0 else None for i in tok.encode(text).ids]
    assert [p for p, _ in vocab.splitter(text)] == ["the", "dog", "sat", "on", "a", "zebra"]


def test_known_patterns_are_the_ones_transformers_ships() -> None:
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    shipped = {*GGUF_PRE_TOKENIZER_SPLITS.values(), PRETOKENIZE_REGEX,
               inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default}
    assert shipped <= set(TS.KNOWN_PATTERNS.values())
    assert " +▁" not in TS.KNOWN_PATTERNS.values()  # SeamlessM4T's: quadratic on a run of spaces


def test_known_patterns_stay_fast_on_hostile_text() -> None:
    """Each known pattern on 20,000 characters (the views' text limit) of the inputs that cost them most: measured
    at most ~40 ms each on this machine; the bound leaves room for a slow CI machine."""
    n = 20_000
    texts = [" " * n + "a", "\n " * (n // 2), "a" * n, "A" * n + "1", "'" * n, "!" * n + " a", "1" * n,
             "a" + "\u0301" * n, " !" * (n // 2), "中" * n + "1", "aA" * (n // 2), "▁" * n + " ", "'s" * (n // 2)]
    for name, pattern in TS.KNOWN_PATTERNS.items():
        tok = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
        tok.pre_tokenizer = _split_pre(pattern)
        start = time.perf_counter()
        for text in texts:
            tok.encode(text)
        assert time.perf_counter() - start < scaled(2.0), name


def test_panicking_tokenizer_is_that_uploads_error_and_the_next_upload_works() -> None:
    """A Precompiled normalizer with a broken character map passes every pattern check but makes the Rust code
    panic on its first text: a PanicException, which `except Exception` does not catch."""
    broken = _tokenizer(normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAAAAAA"})
    with pytest.raises(BaseException) as raw:  # the library itself: a BaseException, not an Exception
        Tokenizer.from_str(json.dumps(broken)).encode("the dog")
    assert TS.is_panic(raw.value) and not isinstance(raw.value, Exception)
    with _Ticker() as ticker:
        with pytest.raises(CorruptFileError) as info:
            register_upload(_files(broken))
    assert str(info.value) == ("'tokenizer.json' is not a valid vocabulary: it fails on ordinary text: the uploaded "
                               "tokenizer crashed on this text (the tokenizers library panicked: index out of bounds: "
                               "the len is 0 but the index is 0)")
    assert ticker.ticks > 0
    uid = register_upload(_files(_tokenizer()))  # the process, and the next upload, are unharmed
    forget_upload(uid)


def test_a_panic_while_encoding_is_a_value_error_of_that_tokenizer() -> None:
    vocab = tokenizer_vocab(_tokenizer())
    vocab.splitter.tokenizer = Tokenizer.from_str(json.dumps(
        _tokenizer(normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAAAAAA"})))
    with pytest.raises(TS.TokenizerError, match="the uploaded tokenizer crashed on this text"):
        vocab.pieces("the dog")
    assert issubclass(TS.TokenizerError, ValueError)


def test_guarded_lets_control_flow_exceptions_through() -> None:
    class Rerun(BaseException):  # like Streamlit's RerunException / StopException
        pass

    def rerun():
        raise Rerun()

    with pytest.raises(Rerun):
        TS.guarded(rerun, "x")
    with pytest.raises(TS.TokenizerError, match=r"^reading \(boom\)$"):
        TS.guarded(lambda: (_ for _ in ()).throw(RuntimeError("boom")), "reading")


def test_regex_patterns_skip_the_model_data_and_find_nested_ones() -> None:
    obj = _tokenizer(pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), _split_pre("x+")]))
    obj["model"]["vocab"] = {**obj["model"]["vocab"], "Regex": 99}  # a token named Regex is data, not a pattern
    assert TS.regex_patterns(obj) == [("pre_tokenizer.pretokenizers[1].pattern", "x+")]


@pytest.mark.parametrize("added", [5, "x", {"content": "a"}])
def test_added_tokens_that_are_not_a_list_are_a_clear_error(added: object) -> None:
    """An uploaded tokenizer.json whose added_tokens is not a list is refused with a ValueError naming the field (the
    upload path turns it into its message), never an uncaught TypeError or AssertionError."""
    with pytest.raises(ValueError, match="added_tokens is a (int|str|dict), not a list"):
        tokenizer_vocab({**_tokenizer(), "added_tokens": added})
