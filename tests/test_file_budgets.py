"""Untrusted model files parsed within budgets (explorer/files/safe_load.py, explorer/data/vocab_files.py, vocab.py):
what a file's tensors, pickle, safetensors header and JSON stand for is checked before anything that big is built, and
every consistency check of a vocabulary is linear."""
from __future__ import annotations

import io
import json
import pickle
import re
import subprocess
import sys
import time
import tracemalloc
import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

from explorer.data.vocab import Vocab
from explorer.loading.loaders import load_model
from explorer.files.safe_load import (CorruptFileError, ModelLoadError, check_tensors, json_values, read_json_bytes,
                                read_json_file, read_weights)
from explorer.loading.uploads import forget_upload, register_upload
from hostile import lstm_state_dict, vocab_json
from timing import scaled, within

ROOT = Path(__file__).resolve().parents[1]


def _pt(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _st(state: dict[str, torch.Tensor]) -> bytes:
    return save({k: v.contiguous() for k, v in state.items()})


# ----------------------------------------------------------------------------------------- tensors
def test_stride_0_tensor_is_refused_before_anything_is_allocated() -> None:
    """1.6 KB standing for 4 GB (before: a peak of 8.5 GB then a raw MemoryError). Run in a child process whose
    address space is capped at 3 GB: materialising the view there would fail with MemoryError instead."""
    code = (
        "import io, resource, torch\n"
        "from explorer.files.safe_load import read_weights\n"
        "buf = io.BytesIO(); torch.save({'w': torch.zeros(1).expand(2**30)}, buf)\n"
        "print(len(buf.getvalue()))\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))\n"
        "try:\n"
        "    read_weights(buf.getvalue(), 'tiny.pt')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    size, message = out.stdout.splitlines()[:2]
    assert int(size) < 2000
    assert message == (
        "CorruptFileError 'tiny.pt': its tensors stand for 4,096.0 MB once laid out; the tensor 'w' of shape "
        "(1073741824,) torch.float32 alone stands for 4,096.0 MB held in 0.0 MB (a stride-0 or overlapping view), "
        "over the 250 MB limit (set EXPLORER_MAX_UPLOAD_MB to change it). Refused before anything was allocated.")


def test_stride_0_upload_is_an_upload_error() -> None:
    with pytest.raises(CorruptFileError, match=r"stands for 4,096.0 MB held in 0.0 MB \(a stride-0 or overlapping"):
        register_upload([("tiny.pt", _pt({"emb.weight": torch.zeros(1, 1).expand(2**20, 2**10)}))])


def test_overlapping_views_within_the_budget_are_copied_to_dense_tensors() -> None:
    row = torch.arange(6.0).reshape(1, 6)
    tensors = read_weights(_pt({"emb.weight": row.expand(10, 6), "b": torch.ones(3)}), "ok.pt").tensors
    assert tensors["emb.weight"].is_contiguous() and tensors["emb.weight"].stride() == (6, 1)
    assert torch.equal(tensors["emb.weight"], row.repeat(10, 1)) and tensors["b"].stride() == (1,)


def test_tied_weights_count_once_and_the_budget_is_a_setting(monkeypatch) -> None:
    w = torch.zeros(512, 512)  # 1 MB, saved under two names sharing one storage
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "1.5")
    assert len(read_weights(_pt({"a": w, "b": w}), "tied.pt").tensors) == 2
    with pytest.raises(CorruptFileError, match=r"stand for 2.0 MB once laid out.* over the 1 MB limit"):
        check_tensors({"a": w, "b": w.t()}, "two.pt", 2**20)  # two views of one storage: two layouts


# ----------------------------------------------------------------------------------------- pickles
class _Storage:
    pass


class _Tensor:
    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (_Storage(), 0, (4,), (1,), False, OrderedDict())


def _pickle_bomb(n_lists: int) -> bytes:
    """A torch.save-format zip whose data.pkl builds n empty lists from one byte each (no memo)."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", 4) if isinstance(obj, _Storage) else None

    pkl = io.BytesIO()
    pickler = Pickler(pkl, protocol=2)
    pickler.fast = True
    pickler.dump({"w": _Tensor(), "x": [[] for _ in range(n_lists)]})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in (("archive/data.pkl", pkl.getvalue()), ("archive/byteorder", b"little"),
                           ("archive/version", b"3\n"), ("archive/data/0", bytes(16))):
            archive.writestr(name, data)
    return out.getvalue()


def test_pickle_that_builds_millions_of_objects_is_refused_before_it_runs(monkeypatch) -> None:
    """4.8 MB of pickle: 7 s and +348 MB in torch's restricted unpickler (measured); refused from its bytes."""
    data = _pickle_bomb(5_000_000)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load ran the pickle bomb"))
    start = time.perf_counter()
    with pytest.raises(CorruptFileError) as info:
        read_weights(data, "bomb.pt")
    assert time.perf_counter() - start < scaled(0.5)
    assert str(info.value).startswith("'bomb.pt': its pickle (archive/data.pkl, the non-tensor part: names, numbers, "
                                      "lists) would take about 310.3 MB to unpickle (4.8 MB of bytes")
    assert "over the 8 MB limit (set EXPLORER_MAX_HEADER_MB to change it)" in str(info.value)
    monkeypatch.undo()
    assert len(read_weights(_pickle_bomb(100), "small.pt").tensors) == 1  # the same layout, small: read


def test_a_training_checkpoint_fits_the_pickle_budget_easily() -> None:
    model = torch.nn.LSTM(8, 8, num_layers=2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.zeros(3, 1, 8))[0].sum().backward()
    opt.step()
    ckpt = {"epoch": 3, "model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
            "losses": [0.5] * 10_000, "vocab": [f"w{i}" for i in range(50_000)]}
    assert len(read_weights(_pt(ckpt), "checkpoint.pt").tensors) == len(model.state_dict())


def test_legacy_format_is_refused_with_a_message() -> None:
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(3)}, buf, _use_new_zipfile_serialization=False)
    with pytest.raises(CorruptFileError, match=r"'old.pt' could not be read as a PyTorch file: it is not in the zip "
                                               r"format torch.save has written since PyTorch 1.6"):
        read_weights(buf.getvalue(), "old.pt")


# -------------------------------------------------------------------------------------- safetensors
def test_safetensors_header_over_its_limit_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_HEADER_MB", "0.001")
    data = _st({f"t{i}": torch.zeros(1) for i in range(100)})
    with pytest.raises(CorruptFileError, match=r"its safetensors header is .* MB, over the 0.001 MB limit \(set "
                                               r"EXPLORER_MAX_HEADER_MB"):
        read_weights(data, "many.safetensors")


# --------------------------------------------------------------------------------------------- JSON
def _big_list_json(n: int) -> bytes:
    return b"[" + b'"a",' * (n - 1) + b'"a"]'


def test_ten_million_entry_vocab_json_is_refused_by_size_before_parsing() -> None:
    """Before: accepted, +2.2 GB. Now counted from its bytes (a C-speed scan) and refused, nothing parsed."""
    data = _big_list_json(10_000_000)  # 38 MB: under the byte limit, over the value limit
    weights = _st(lstm_state_dict(vocab_size=10))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(CorruptFileError) as info:
            register_upload([("lstm.safetensors", weights), ("vocab.json", data)])
        elapsed, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == ("'vocab.json' holds up to 10,000,001 JSON values, over the 3,000,000 limit (set "
                               "EXPLORER_MAX_JSON_VALUES to change it). Refused before parsing.")
    assert elapsed < scaled(1.0) and peak < 20 * 2**20


def test_json_values_beyond_what_the_weights_need_are_refused_before_parsing() -> None:
    with pytest.raises(CorruptFileError) as info:
        read_json_bytes(_big_list_json(100_000), "vocab.json", rows=10)
    assert str(info.value) == ("'vocab.json' holds up to 100,001 JSON values, far more than a vocabulary or config "
                               "of these weights needs: their largest weight matrix has 10 rows, which allows 65,696 "
                               "values (16 per row + 65,536). Refused before parsing.")


def test_vocabulary_larger_than_the_embedding_rows_is_refused_before_it_is_built(monkeypatch) -> None:
    import explorer.data.vocab_files as VF

    monkeypatch.setattr(VF, "read_vocabulary", lambda *a, **k: pytest.fail("the vocabulary was built"))
    files = [("lstm.safetensors", _st(lstm_state_dict(vocab_size=10))), ("vocab.json", vocab_json(2_000))]
    with pytest.raises(CorruptFileError) as info:
        register_upload(files)
    assert str(info.value) == ("'vocab.json' has 2,000 tokens, but the largest weight matrix of lstm.safetensors has "
                               "32 rows: a vocabulary may have at most 1,024 more tokens than its model's embedding "
                               "has rows. Refused before it was read.")


def test_a_vocabulary_within_the_slack_is_read_and_checked_by_the_view_as_before() -> None:
    uid = register_upload([("lstm.safetensors", _st(lstm_state_dict(vocab_size=10))), ("vocab.json", vocab_json(12))])
    loaded = load_model(uid)
    assert len(loaded.vocabs["vocab"]) == 12
    forget_upload(uid)


def test_json_byte_limit_and_depth(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EXPLORER_MAX_JSON_MB", "0.01")
    with pytest.raises(ModelLoadError, match=r"'vocab.json' is 0.0 MB, over the 0.01 MB limit \(set EXPLORER_MAX_JSON"):
        read_json_bytes(b" " * 20_000, "vocab.json")
    (tmp_path / "config.json").write_bytes(b"{}" + b" " * 20_000)
    with pytest.raises(ModelLoadError, match="EXPLORER_MAX_JSON_MB"):
        read_json_file(tmp_path / "config.json")
    monkeypatch.delenv("EXPLORER_MAX_JSON_MB")
    with pytest.raises(CorruptFileError, match="'deep.json' nests lists or objects too deeply to be read"):
        read_json_bytes(b"[" * 100_000 + b"]" * 100_000, "deep.json")


def test_json_values_is_an_upper_bound() -> None:
    for obj in ([], [[], [], {}], {"a": [1, 2, {"b": None}]}, ["x,y", "[{"], 7):
        text = json.dumps(obj).encode()
        parsed = json.loads(text)

        def count(v) -> int:
            if isinstance(v, list):
                return 1 + sum(count(x) for x in v)
            if isinstance(v, dict):
                return 1 + sum(1 + count(x) for x in v.values())
            return 1

        assert count(parsed) <= json_values(text)


# ----------------------------------------------------------------------------------------- linearity
def test_a_400k_entry_vocabulary_is_checked_in_well_under_a_second() -> None:
    """ids from 1: `ids.count(i)` in a loop made this quadratic (40k entries: 25 s; 400k: ~40 min)."""
    n = 400_000  # the dicts are built before the clock starts: only the check is timed
    for obj, phrase in (({f"t{i}": i + 1 for i in range(n)}, "missing [0], range found 1..400000"),
                        ({**{f"t{i}": i for i in range(n)}, "dup": 7}, "duplicated id(s): [7]")):
        with within(1.0, f"checking a {n:,}-entry vocabulary with {phrase!r}"):
            with pytest.raises(ValueError, match=re.escape(phrase)):
                Vocab.from_json(obj)
    good = {f"t{i}": i for i in range(n)}
    with within(2.0, f"reading a {n:,}-entry vocabulary"):
        vocab = Vocab.from_json(good)
    assert len(vocab) == n
