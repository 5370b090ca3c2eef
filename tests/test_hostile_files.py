"""Hostile files, uploaded and in `local:` folders: each is refused with a message that names what is wrong, nothing
in it runs, nothing is unpacked or allocated beyond the file, and the pages show the message as st.error.

(tests/test_registry.py already covers: pickle payloads uploaded and in a local folder, corrupt/truncated
safetensors uploads, the size limit in register_upload, bad vocab/JSON uploads, a broken HF config.json.)
"""
from __future__ import annotations

import io
import json
import pickle
import resource
import struct
import uuid
import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from safetensors.torch import save, save_file

from conftest import assert_no_exception, run_page
from explorer.loading import catalogue
from explorer.loading.catalogue import ModelId
from explorer.loading.loaders import load_model
from explorer.files.safe_load import ModelLoadError
from explorer.loading.uploads import register_upload
from explorer.files.safe_load import CorruptFileError, UnsafeFileError, read_state_dict
from families import BERT_ONE_LAYER, tiny_config, tiny_model
from hostile import conv_state_dict, lstm_state_dict, pickle_payload_pt, vocab_json

LSTM_PAGE = "app_pages/lstm_gates.py"
MODELS_PAGE = "app_pages/catalogue.py"


def _messages(elements) -> str:
    """Texts of message elements with markdown escapes removed."""
    return " | ".join(str(e.value) for e in elements).replace("\\", "")


def _st_bytes(state: dict[str, torch.Tensor]) -> bytes:
    return save({k: v.contiguous() for k, v in state.items()})


def _folder(root: Path, monkeypatch, files: dict[str, bytes]) -> str:
    """A uniquely named local:<folder> under EXPLORER_MODEL_PATH=root holding `files`; returns its id."""
    name = f"hostile-{uuid.uuid4().hex[:8]}"  # unique: the model cache is process-wide
    folder = root / name
    folder.mkdir(parents=True)
    for fname, data in files.items():
        (folder / fname).write_bytes(data)
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(root))
    return f"local:{name}"


def _upload_on_page(files: list[tuple[str, bytes]]):
    """The Models page with `files` chosen in its uploader and "Add to the catalogue" clicked."""
    at = run_page(MODELS_PAGE, {"model": "builtin:lstm-lm"})
    at.file_uploader(key="upload_files").set_value([(n, d, "application/octet-stream") for n, d in files]).run()
    buttons = [b for b in at.button if b.label == "Add to the catalogue"]
    assert buttons, "the add button appears once files are chosen"
    buttons[0].click().run()
    assert_no_exception(at)
    return at


# ------------------------------------------------------------------------------- corrupt weights
GOOD = _st_bytes({"w": torch.arange(64, dtype=torch.float32).reshape(8, 8)})


def _safetensors_header(header: dict, payload: bytes = b"\0" * 16) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + payload


CORRUPT_SAFETENSORS = {
    "random-bytes": (bytes(range(256)) * 8, "not a valid safetensors file"),
    "truncated": (GOOD[: len(GOOD) // 2], "not a valid safetensors file"),
    "huge-shape": (_safetensors_header({"w": {"dtype": "F32", "shape": [10**6, 10**6],
                                              "data_offsets": [0, 4 * 10**12]}}),
                   "incomplete metadata"),
    "shape-beyond-data": (_safetensors_header({"w": {"dtype": "F32", "shape": [10**5, 10**5],
                                                     "data_offsets": [0, 16]}}),
                          "invalid shape"),
    "header-length-2^62": (struct.pack("<Q", 2**62) + b"{}", "header too large"),
    "shape-overflow": (_safetensors_header({"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 16]}}),
                       "overflow"),
}


@pytest.mark.parametrize("case", list(CORRUPT_SAFETENSORS))
def test_corrupt_safetensors_upload_and_local(case: str, tmp_path: Path, monkeypatch) -> None:
    data, detail = CORRUPT_SAFETENSORS[case]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptFileError) as info:
        register_upload([("model.safetensors", data)])
    assert "'model.safetensors' is not a valid safetensors file" in str(info.value) and detail in str(info.value)
    mid = _folder(tmp_path, monkeypatch, {"model.safetensors": data, "vocab.json": vocab_json(10)})
    with pytest.raises(CorruptFileError) as info:
        load_model(mid)
    assert "'model.safetensors' is not a valid safetensors file" in str(info.value) and detail in str(info.value)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, f"peak memory grew by {grown_mb:.0f} MB for a {len(data)}-byte file"


def test_truncated_safetensors_in_local_folder_is_an_error_on_the_page(tmp_path: Path, monkeypatch) -> None:
    mid = _folder(tmp_path, monkeypatch, {"model.safetensors": GOOD[:40], "vocab.json": vocab_json(10)})
    at = run_page(LSTM_PAGE, {"model": mid, "text": "the dog"})
    assert_no_exception(at)
    assert "'model.safetensors' is not a valid safetensors file" in _messages(at.error)


def test_corrupt_safetensors_upload_is_an_error_on_the_page() -> None:
    at = _upload_on_page([("broken.safetensors", bytes(range(256)) * 4)])
    assert "'broken.safetensors' is not a valid safetensors file" in _messages(at.error)
    assert not at.success


# ------------------------------------------------------------------------------------ pickle code
def test_pickle_payload_pth_in_local_folder_is_an_error_on_the_page(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "pwned-local.txt"
    mid = _folder(tmp_path / "models", monkeypatch,
                  {"model.pth": pickle_payload_pt(marker), "vocab.json": vocab_json(10)})
    at = run_page(LSTM_PAGE, {"model": mid, "text": "the dog"})
    assert_no_exception(at)
    assert "'model.pth' was refused" in _messages(at.error) and "Nothing in it was executed" in _messages(at.error)
    assert not marker.exists()


def test_pickle_payload_bin_in_hf_folder_does_not_run(tmp_path: Path, monkeypatch) -> None:
    """A Hugging Face folder whose pytorch_model.bin is a pickle payload: transformers reads it without running it."""
    marker = tmp_path / "pwned-hf.txt"
    tiny_config("BertModel", 50, **BERT_ONE_LAYER).save_pretrained(tmp_path / "cfg")
    mid = _folder(tmp_path / "models", monkeypatch, {"config.json": (tmp_path / "cfg" / "config.json").read_bytes(),
                                                     "pytorch_model.bin": pickle_payload_pt(marker)})
    with pytest.raises(UnsafeFileError) as info:
        load_model(mid)
    assert str(info.value).startswith(f"{mid}: its weights were refused: the .bin file is a pickle")
    assert "Nothing in it was executed" in str(info.value) and "\x1b" not in str(info.value)
    at = run_page(MODELS_PAGE, {"model": mid})
    assert_no_exception(at)
    assert "its weights were refused" in _messages(at.error)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------- zip bombs
class _Storage:
    """Stands for a torch storage in a hand-written data.pkl (see _torch_zip)."""


class _Tensor:
    def __init__(self, numel: int) -> None:
        self.numel, self.storage = numel, _Storage()

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, (self.storage, 0, (self.numel,), (1,), False, OrderedDict()))


def _torch_zip(numel: int, deflate_data: bool) -> bytes:
    """A torch.save-format zip holding one float32 tensor of `numel` zeros, its data record deflated or stored,
    written without ever holding the tensor in memory."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", numel) if isinstance(obj, _Storage) else None

    pkl = io.BytesIO()
    Pickler(pkl, protocol=2).dump({"weight": _Tensor(numel)})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pkl.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        info = zipfile.ZipInfo("archive/data/0")
        info.compress_type = zipfile.ZIP_DEFLATED if deflate_data else zipfile.ZIP_STORED
        chunk = bytes(1 << 20)
        with archive.open(info, "w", force_zip64=True) as fh:
            written = 0
            while written < numel * 4:
                n = min(len(chunk), numel * 4 - written)
                fh.write(chunk[:n])
                written += n
    return out.getvalue()


@pytest.fixture(scope="module")
def zip_bomb() -> bytes:
    """A 64 MB tensor of zeros deflated into a .pt of about 65 KB (1000:1; a 500 MB upload would unpack to 500 GB)."""
    data = _torch_zip(2**24, deflate_data=True)
    assert len(data) < 200_000
    return data


def _no_torch_load(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("torch.load was called on a zip bomb: it would have unpacked it")

    monkeypatch.setattr(torch, "load", refuse)


def test_zip_bomb_pt_is_refused_before_unpacking(zip_bomb: bytes, tmp_path: Path, monkeypatch) -> None:
    assert zipfile.ZipFile(io.BytesIO(zip_bomb)).getinfo("archive/data/0").file_size == 2**26  # the payload is real
    _no_torch_load(monkeypatch)
    with pytest.raises(CorruptFileError) as info:
        register_upload([("bomb.pt", zip_bomb)])
    msg = str(info.value)
    assert "'bomb.pt' is a zip archive with compressed members (archive/data/0)" in msg and "zip bomb" in msg
    mid = _folder(tmp_path, monkeypatch, {"bomb.pt": zip_bomb})
    with pytest.raises(CorruptFileError, match="compressed members"):
        load_model(mid)


def test_zip_bomb_upload_is_an_error_on_the_page(zip_bomb: bytes) -> None:
    at = _upload_on_page([("bomb.pt", zip_bomb)])
    assert "compressed members" in _messages(at.error) and "zip bomb" in _messages(at.error)


def test_zip_declaring_more_than_the_file_holds_is_refused(monkeypatch) -> None:
    data = bytearray(_torch_zip(4, deflate_data=False))
    # claim 4 GB for the 16-byte data record, in the local header and in the central directory
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = data.find(sig + b"", data.find(b"archive/data/0") - 80 if sig == b"PK\x03\x04" else 0)
        while start >= 0:
            name_len = struct.unpack_from("<H", data, start + (26 if sig == b"PK\x03\x04" else 28))[0]
            name_at = start + (30 if sig == b"PK\x03\x04" else 46)
            if bytes(data[name_at:name_at + name_len]) == b"archive/data/0":
                struct.pack_into("<I", data, start + offset, 0xFFFF0000)
                break
            start = data.find(sig, start + 4)
    _no_torch_load(monkeypatch)
    with pytest.raises(CorruptFileError) as info:
        read_state_dict(bytes(data), "liar.pt")
    assert "'liar.pt' declares 4,095.9 MB of contents in a 0.0 MB file" in str(info.value)


def test_legacy_pt_declaring_a_huge_storage_is_refused(tmp_path: Path) -> None:
    """The pre-zip torch format declares storage sizes in its pickle: a lie is a clear error, not an allocation."""
    from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", 2**30, None) if isinstance(obj, _Storage) else None

    buf = io.BytesIO()
    for obj in (MAGIC_NUMBER, PROTOCOL_VERSION, {"protocol_version": PROTOCOL_VERSION, "little_endian": True,
                                                 "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(obj, buf, protocol=2)
    Pickler(buf, protocol=2).dump({"weight": _Tensor(2**30)})
    pickle.dump(["0"], buf, protocol=2)
    buf.write((2**30).to_bytes(8, "little"))  # ... but no data follows
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptFileError, match="'legacy.pt' could not be read as a PyTorch file"):
        read_state_dict(buf.getvalue(), "legacy.pt")
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 100


def test_upload_over_the_size_limit_is_an_error_on_the_page(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "1")
    big = _st_bytes({"w": torch.zeros(400_000)})  # 1.5 MB
    at = _upload_on_page([("big.safetensors", big)])
    assert "'big.safetensors' is 1.5 MB, over the 1 MB limit (set EXPLORER_MAX_UPLOAD_MB to change it)" \
        in _messages(at.error)


def test_config_claiming_a_huge_model_allocates_nothing() -> None:
    """A 200-byte config JSON asking for the largest seq2seq the bounds allow (about 3.4 GB) next to a tiny weights
    file: refused from the shapes alone, before the model is built."""
    config = {"architecture": "seq2seq", "config": {"src_vocab_size": 200_000, "tgt_vocab_size": 200_000,
                                                    "emb_dim": 1024, "hidden_size": 1024, "num_layers": 6}}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptFileError) as info:
        register_upload([("tiny.safetensors", _st_bytes({"w": torch.zeros(2)})),
                         ("config.json", json.dumps(config).encode())])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    msg = str(info.value)
    assert msg.startswith("tiny.safetensors: the weights do not match the config (56 missing tensor(s): "
                          "src_embedding.weight, tgt_embedding.weight")
    assert "1 unexpected tensor(s): w" in msg
    assert grown_mb < 200, f"peak memory grew by {grown_mb:.0f} MB"


# ----------------------------------------------------------------------------- wrong architecture
def test_conv_net_uploaded_is_refused_by_the_recurrent_view() -> None:
    uid = register_upload([("convnet.safetensors", _st_bytes(conv_state_dict())), ("vocab.json", vocab_json(10))])
    at = run_page(LSTM_PAGE, {"model": uid, "text": "the dog"})
    assert_no_exception(at)
    msg = _messages(at.error)
    assert f"{uid} cannot be read as an LSTM, GRU or Elman RNN" in msg
    assert "No recurrent weights found: expected keys ending in weight_ih_l0" in msg
    assert "found: 0.bias (4,), 0.weight (4, 3, 3, 3), 3.bias (2,), 3.weight (2, 16)." in msg  # keys and shapes


def test_conv_net_with_an_rnn_config_is_refused_at_upload() -> None:
    config = {"architecture": "rnn_lm", "config": {"vocab_size": 10, "emb_dim": 6, "hidden_size": 8}}
    with pytest.raises(CorruptFileError) as info:
        register_upload([("convnet.safetensors", _st_bytes(conv_state_dict())),
                         ("config.json", json.dumps(config).encode())])
    msg = str(info.value)
    assert "convnet.safetensors: the weights do not match the config" in msg
    assert "7 missing tensor(s): embedding.weight, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0 …" in msg
    assert "4 unexpected tensor(s): 0.bias, 0.weight, 3.bias, 3.weight" in msg


@pytest.mark.parametrize("case, expected", [
    ("layer-1-input", "'lstm.weight_ih_l1' takes inputs of size 5; expected 8"),
    ("bias", "'lstm.bias_hh_l0' has shape (31,); expected (32,)"),
    ("hh-not-a-multiple", "'lstm.weight_hh_l0' has shape (32, 7); expected (G*H, H) with G = 4 (LSTM), 3 (GRU)"),
    ("five-gates", "'lstm.weight_hh_l0' has shape (40, 8): 5 × H rows, but an LSTM has 4 × H"),
    ("missing-layer", "Missing 'lstm.weight_hh_l1'"),
])
def test_lstm_keys_with_inconsistent_shapes(case: str, expected: str, tmp_path: Path, monkeypatch) -> None:
    state = lstm_state_dict(layers=2)
    if case == "layer-1-input":
        state["lstm.weight_ih_l1"] = torch.zeros(32, 5)
    elif case == "bias":
        state["lstm.bias_hh_l0"] = torch.zeros(31)
    elif case == "hh-not-a-multiple":
        state["lstm.weight_hh_l0"] = torch.zeros(32, 7)
    elif case == "five-gates":
        state["lstm.weight_hh_l0"] = torch.zeros(40, 8)
    else:
        del state["lstm.weight_hh_l1"]
    uid = register_upload([("lstm.safetensors", _st_bytes(state)), ("vocab.json", vocab_json(10))])
    mid = _folder(tmp_path, monkeypatch, {"lstm.safetensors": _st_bytes(state), "vocab.json": vocab_json(10)})
    for model_id in (uid, mid):
        at = run_page(LSTM_PAGE, {"model": model_id, "text": "the dog"})
        assert_no_exception(at)
        assert f"{model_id} cannot be read as an LSTM" in _messages(at.error)
        assert expected in _messages(at.error), _messages(at.error)


# ------------------------------------------------------------------------------------- vocabularies
def test_vocab_that_does_not_match_the_embedding(tmp_path: Path, monkeypatch) -> None:
    files = {"lstm.safetensors": _st_bytes(lstm_state_dict(vocab_size=10)), "vocab.json": vocab_json(7)}
    uid = register_upload(list(files.items()))
    mid = _folder(tmp_path, monkeypatch, files)
    for model_id in (uid, mid):
        at = run_page(LSTM_PAGE, {"model": model_id, "text": "the dog"})
        assert_no_exception(at)
        assert "The vocabulary has 7 tokens but the embedding matrix has 10 rows" in _messages(at.error)


@pytest.mark.parametrize("content, expected", [
    (b"{not json", "'vocab.json' is not valid JSON: Expecting property name enclosed in double quotes at line 1, "
                   "column 2"),
    (b"42", "'vocab.json' is not a valid vocabulary: vocabulary must be a JSON list of tokens or a {token: id} "
            "object, got int"),
    (b'"just a string"', "'vocab.json' is not a valid vocabulary: vocabulary must be a JSON list"),
    (b"\xff\xfe\x00\x01", "'vocab.json' is not UTF-8 text, so it cannot be JSON"),
    (b'{"a": "zero", "b": 1}', "'vocab.json' is not a valid vocabulary: id of token 'a' must be an integer"),
    (b"[]", "'vocab.json' is not a valid vocabulary: vocabulary is empty"),
], ids=["not-json", "number", "string", "binary", "string-ids", "empty"])
def test_vocab_json_that_is_not_a_vocabulary(content: bytes, expected: str, tmp_path: Path, monkeypatch) -> None:
    weights = _st_bytes(lstm_state_dict())
    with pytest.raises(CorruptFileError) as info:
        register_upload([("lstm.safetensors", weights), ("vocab.json", content)])
    assert expected in str(info.value)
    mid = _folder(tmp_path, monkeypatch, {"lstm.safetensors": weights, "vocab.json": content})
    with pytest.raises(CorruptFileError) as info:
        load_model(mid)
    assert expected in str(info.value)


def test_vocab_json_that_is_a_number_is_an_error_on_both_pages(tmp_path: Path, monkeypatch) -> None:
    at = _upload_on_page([("lstm.safetensors", _st_bytes(lstm_state_dict())), ("vocab.json", b"42")])
    assert "'vocab.json' is not a valid vocabulary" in _messages(at.error)
    mid = _folder(tmp_path, monkeypatch, {"lstm.safetensors": _st_bytes(lstm_state_dict()), "vocab.json": b"42"})
    at = run_page(LSTM_PAGE, {"model": mid, "text": "the dog"})
    assert_no_exception(at)
    assert "'vocab.json' is not a valid vocabulary" in _messages(at.error)


# ----------------------------------------------------------------------------- Hugging Face folders
@pytest.mark.parametrize("content, expected", [
    (b'{"model_type": "bert", "hidden_size": ', "config.json' is not valid JSON: Expecting value at line 1, column 39"),
    (b"[1, 2]", "its config.json holds a JSON list, not an object of settings"),
    (b"42", "its config.json holds a JSON int, not an object of settings"),
    (b"\x89PNG\r\n\x1a\n", "'config.json' is not UTF-8 text, so it cannot be JSON"),
], ids=["truncated", "list", "number", "binary"])
def test_config_json_that_is_not_json(content: bytes, expected: str, tmp_path: Path, monkeypatch) -> None:
    mid = _folder(tmp_path, monkeypatch, {"config.json": content})
    with pytest.raises(CorruptFileError) as info:
        load_model(mid)
    assert str(info.value).startswith(f"{mid}: ") and expected in str(info.value)
    at = run_page(MODELS_PAGE, {"model": mid})
    assert_no_exception(at)
    assert expected in _messages(at.error)


def _remote_code_folder(root: Path, monkeypatch, marker: Path, model_type: str) -> str:
    """A folder whose config.json maps the Auto classes to a modeling file that would create `marker` on import."""
    code = (f"open({str(marker)!r}, 'w').write('ran')\n"
            "from transformers import BertConfig, BertModel\n"
            "class EvilConfig(BertConfig):\n    model_type = 'evil'\n"
            "class EvilModel(BertModel):\n    config_class = EvilConfig\n")
    auto_map = {"AutoConfig": "modeling_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
    files = {"modeling_evil.py": code.encode()}
    if model_type == "bert":  # a real model of a known type, with auto_map in its config and tokenizer config
        tiny_model("BertModel", 50, seed=0, **BERT_ONE_LAYER).save_pretrained(root / "src")
        for f in (root / "src").iterdir():
            files[f.name] = f.read_bytes()
        cfg = json.loads(files["config.json"])
        files["tokenizer_config.json"] = json.dumps(
            {"auto_map": {"AutoTokenizer": ["modeling_evil.EvilTokenizer", None]}}).encode()
    else:
        cfg = {"model_type": model_type, "architectures": ["EvilModel"]}
    cfg["auto_map"] = auto_map
    files["config.json"] = json.dumps(cfg).encode()
    return _folder(root / "models", monkeypatch, files)


def test_config_asking_for_remote_code_is_refused_and_nothing_runs(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "remote-code-ran.txt"
    mid = _remote_code_folder(tmp_path, monkeypatch, marker, "evil")
    with pytest.raises(ModelLoadError) as info:
        load_model(mid)
    assert str(info.value) == (f"{mid} needs custom code from its repository (trust_remote_code), which the explorer "
                               "never runs.")
    at = run_page(MODELS_PAGE, {"model": mid})
    assert_no_exception(at)
    assert "needs custom code from its repository (trust_remote_code)" in _messages(at.error)
    assert not marker.exists()


def test_auto_map_next_to_a_known_model_type_is_ignored(tmp_path: Path, monkeypatch) -> None:
    """model_type bert + auto_map: the library's own BertModel is used; the folder's Python file never runs."""
    marker = tmp_path / "remote-code-ran.txt"
    mid = _remote_code_folder(tmp_path, monkeypatch, marker, "bert")
    loaded = load_model(mid)
    assert type(loaded.model).__module__.startswith("transformers.models.bert")
    assert not marker.exists()


# ------------------------------------------------------------------------------- ids that are paths
@pytest.mark.parametrize("text, expected", [
    ("hf:../../etc", "'hf:../../etc' is not a valid hf model id: a Hugging Face id is 'name' or 'owner/name'"),
    ("hf:/etc/passwd", "'hf:/etc/passwd' is not a valid hf model id"),
    ("hf:..", "'hf:..' is not a valid hf model id"),
    ("local:../x", "'local:../x' is not a valid local model id: use the name of a folder listed in "
                   "EXPLORER_MODEL_PATH"),
    ("local:/etc", "'local:/etc' is not a valid local model id"),
    ("upload:../../x", "'upload:../../x' is not a valid upload model id"),
])
def test_ids_that_look_like_paths(text: str, expected: str) -> None:
    with pytest.raises(ModelLoadError) as info:
        ModelId.parse(text)
    assert str(info.value).startswith(expected) and str(info.value).endswith("never a path.")
    with pytest.raises(ModelLoadError, match="never a path"):
        load_model(text)


@pytest.mark.parametrize("page", [MODELS_PAGE, LSTM_PAGE])
@pytest.mark.parametrize("text", ["hf:../../etc", "hf:/etc/passwd", "local:../x"])
def test_path_ids_in_the_url_are_a_warning(page: str, text: str) -> None:
    at = run_page(page, {"model": text, "text": "the dog"})
    assert_no_exception(at)
    assert f"Ignoring ?model=: '{text}' is not a valid" in _messages(at.warning)
    assert "never a path" in _messages(at.warning)


def test_path_typed_as_hugging_face_id_is_an_error() -> None:
    at = run_page(MODELS_PAGE, {"model": "builtin:lstm-lm"})
    at.text_input[0].set_value("../../etc/passwd").run()
    [b for b in at.button if b.label == "Open Hugging Face model"][0].click().run()
    assert_no_exception(at)
    assert "'hf:../../etc/passwd' is not a valid hf model id" in _messages(at.error)
    assert at.query_params.get("model") in ("builtin:lstm-lm", ["builtin:lstm-lm"])


def test_local_names_are_looked_up_never_joined(tmp_path: Path, monkeypatch) -> None:
    """A folder that exists next to EXPLORER_MODEL_PATH (not inside it) is not reachable by name."""
    (tmp_path / "secret").mkdir()
    save_file({"w": torch.zeros(2)}, str(tmp_path / "secret" / "model.safetensors"))
    (tmp_path / "models").mkdir()
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path / "models"))
    assert "local:secret" not in {e.id for e in catalogue.catalogue()}
    with pytest.raises(ModelLoadError, match="There is no model folder 'secret' in EXPLORER_MODEL_PATH"):
        load_model("local:secret")
