"""Issue 18: checkpoints and vocabularies saved the ways students save them open in the recurrent-cell, word-embedding
and decoding views, and the gates equal torch.nn.LSTM / nn.GRU on the same token ids.

Each model is a real nn.Embedding + nn.LSTM/nn.GRU + nn.Linear language model built here, saved the way people do
(save_file(model.state_dict()), torch.save of a training dict, a Lightning-style .ckpt, nn.DataParallel, tied
weights), with vocabularies as people save them (a list without <bos>/<eos>, torchtext's itos/stoi, a tokenizers
tokenizer.json, characters). The reference is always the test's own module run by torch on the ids the view fed.
"""
from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save, save_model

from conftest import assert_no_exception, run_page
from explorer.adapters.generation import Strategy
from explorer.loading.loaders import load_model
from explorer.probes import decoding_strategies as D
from explorer.probes import word_embeddings as E
from explorer.probes.lstm_gates import RNNGatesError, rnn_gates
from explorer.files.safe_load import CorruptFileError, UnsafeFileError
from explorer.loading.uploads import forget_upload, register_upload

TOL = 1e-5
WORDS = ["the", "a", "dog", "dogs", "cat", "sat", "sleeps", "on", "mat", "garden", "in", "big", "small", "."]
TEXT = "The dog sat on the mat ."


class StudentLM(nn.Module):
    """What a student writes: embedding -> 2-layer LSTM or GRU -> linear head, batch_first either way, tied or not.
    names: the attribute names of the embedding and the head (PyTorch's word_language_model: encoder, decoder)."""

    def __init__(self, V: int, cell: str = "lstm", E: int = 8, H: int = 12, batch_first: bool = False,
                 tie: bool = False, seed: int = 0, names: tuple[str, str] = ("embedding", "fc")) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.batch_first, self.names = batch_first, names
        setattr(self, names[0], nn.Embedding(V, H if tie else E))
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](H if tie else E, H, 2, batch_first=batch_first)
        setattr(self, names[1], nn.Linear(H, V))
        with torch.no_grad():  # larger than the default init, so the gates leave their linear range
            for p in self.rnn.parameters():
                p.uniform_(-0.8, 0.8)
        if tie:
            self.head.weight = self.emb.weight
        self.eval()

    @property
    def emb(self) -> nn.Embedding:
        return getattr(self, self.names[0])

    @property
    def head(self) -> nn.Linear:
        return getattr(self, self.names[1])

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T) -> top-layer outputs (B, T, H), logits (B, T, V)."""
        x = self.emb(ids)
        out, _ = self.rnn(x if self.batch_first else x.transpose(0, 1))
        out = out if self.batch_first else out.transpose(0, 1)
        return out, self.head(out)


def torch_reference(rnn: nn.RNNBase, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Per layer, what torch computes on x (T, E): h (and c) at every step from a one-layer copy of the module run
    one step at a time (torch's own kernel), and the gates from F.linear on the module's weights with torch's h_{t-1}.
    """
    lstm = isinstance(rnn, nn.LSTM)
    layers, inp = [], x
    for layer in range(rnn.num_layers):
        one = type(rnn)(inp.shape[1], rnn.hidden_size, 1, batch_first=True)
        one.load_state_dict({k.replace(f"_l{layer}", "_l0"): v for k, v in rnn.state_dict().items()
                             if k.endswith(f"_l{layer}")})
        hs, cs, state = [], [], None
        with torch.no_grad():
            for t in range(inp.shape[0]):
                o, state = one(inp[None, t:t + 1], state)
                hs.append(o[0, 0])
                if lstm:
                    cs.append(state[1][0, 0])
            h = torch.stack(hs)
            h_prev = torch.cat([torch.zeros_like(h[:1]), h[:-1]])
            gx = F.linear(inp, getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"))
            gh = F.linear(h_prev, getattr(rnn, f"weight_hh_l{layer}"), getattr(rnn, f"bias_hh_l{layer}"))
        if lstm:
            i, f, g, o = (gx + gh).chunk(4, dim=-1)
            got = {"i": i.sigmoid(), "f": f.sigmoid(), "g": g.tanh(), "o": o.sigmoid(), "c": torch.stack(cs), "h": h}
        else:
            (xr, xz, xn), (hr, hz, hn) = gx.chunk(3, dim=-1), gh.chunk(3, dim=-1)
            r = (xr + hr).sigmoid()
            got = {"r": r, "z": (xz + hz).sigmoid(), "n": (xn + r * hn).tanh(), "h": h}
        layers.append(got)
        inp = h
    return layers


def assert_gates_match(model: StudentLM, loaded, text: str = TEXT):
    """The view's gates, states and next-token probabilities equal torch's on the ids the view fed."""
    trace = rnn_gates(loaded, text)
    assert len(trace) > 0, trace.notes
    ids = torch.tensor([trace.ids])
    with torch.no_grad():
        out, logits = model(ids)
        reference = torch_reference(model.rnn, model.emb(ids)[0])
    assert torch.allclose(reference[-1]["h"], out[0], atol=1e-6)  # the one-layer copies are the module
    for layer, ref in enumerate(reference):
        for name, value in ref.items():
            np.testing.assert_allclose(trace.gates[name][layer, 0], value.numpy(), atol=TOL, err_msg=f"{layer} {name}")
    assert trace.max_abs_error < TOL
    probs = torch.softmax(logits[0], -1)
    unk = loaded.vocabs["vocab"].unk_id  # the unknown-word token: its own column, not ranked among the next words
    ranked = probs if unk is None else probs.index_fill(-1, torch.tensor([unk]), -1.0)
    top = ranked.topk(trace.next_ids.shape[1], dim=-1)
    np.testing.assert_array_equal(trace.next_ids, top.indices.numpy())
    np.testing.assert_allclose(trace.next_probs, probs.gather(-1, top.indices).numpy(), atol=1e-6)
    if unk is not None:
        np.testing.assert_allclose(trace.unknown_probs, probs[:, unk].numpy(), atol=1e-6)
    return trace


def _upload(files: dict[str, bytes]) -> str:
    return register_upload(list(files.items()))


def _folder(tmp_path: Path, monkeypatch, files: dict[str, bytes]) -> str:
    """A local:<name> folder under EXPLORER_MODEL_PATH holding `files`; returns its id."""
    name = f"student-{uuid.uuid4().hex[:8]}"  # the model and probe caches are process-wide
    (tmp_path / name).mkdir()
    for fname, data in files.items():
        (tmp_path / name / fname).write_bytes(data)
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    return f"local:{name}"


def _st(state: dict[str, torch.Tensor]) -> bytes:
    """safetensors bytes of a state dict, as save_file writes them."""
    return save({k: v.contiguous() for k, v in state.items()})


def _torch_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _rows(loaded) -> dict[str, str]:
    return dict(loaded.adapter.describe())


def _messages(elements) -> str:
    return " | ".join(str(e.value) for e in elements).replace("\\", "")


# ------------------------------------------------------------------------------ the student models
def test_list_vocab_without_bos_eos_and_save_file_state_dict() -> None:
    """The issue's first case: save_file(model.state_dict()) + ["<pad>", "<unk>", "the", ...], no <bos>/<eos>."""
    vocab = ["<pad>", "<unk>", *WORDS]
    model = StudentLM(len(vocab), "lstm", batch_first=False)
    uid = _upload({"model.safetensors": _st(model.state_dict()),
                   "vocab.json": _json(vocab)})
    loaded = load_model(uid)
    v = loaded.vocabs["vocab"]
    assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, None, None) and v.level == "word"
    trace = assert_gates_match(model, loaded, "The dog sat on the zebra .")
    assert trace.tokens == ("the", "dog", "sat", "on", "the", "zebra→<unk>", ".") and not trace.special[0]
    notes = " ".join(trace.notes)
    assert "fed as is" in notes and "shown as <unk>: zebra" in notes
    rows = _rows(loaded)
    assert rows["vocabulary"] == "16 tokens, word-level, lowercase; <unk> id 1, <pad> id 0, no <bos>, no <eos>"
    assert rows["input"].startswith("the words of the text (lowercased), as they are: no beginning-of-sentence")
    assert rows["vocabulary read from"] == "vocab.json (a list of tokens)"
    assert rows["weights"] == "a state dict of 11 tensors" and rows["cell"] == "LSTM" and rows["layers"] == "2"
    assert loaded.adapter.eos_ids == () and loaded.adapter.bos_id is None


def test_torchtext_vocab_with_unk_first_and_a_bare_pt_in_a_folder(tmp_path: Path, monkeypatch) -> None:
    """torchtext's {"itos", "stoi"} with <unk> at 0 and <pad> at 1 (and <sos>/<eos>); a GRU, batch_first=True,
    torch.save(model.state_dict()) in an EXPLORER_MODEL_PATH folder."""
    itos = ["<unk>", "<pad>", "<sos>", "<eos>", *WORDS]
    model = StudentLM(len(itos), "gru", batch_first=True, seed=1)
    torchtext = {"itos": itos, "stoi": {t: i for i, t in enumerate(itos)}}
    mid = _folder(tmp_path, monkeypatch, {"model.pt": _torch_bytes(model.state_dict()), "vocab.json": _json(torchtext)})
    loaded = load_model(mid)
    v = loaded.vocabs["vocab"]
    assert (v.unk_id, v.pad_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
    trace = assert_gates_match(model, loaded)
    assert trace.tokens[0] == "<sos>" and trace.special[0] and trace.names == ("r", "z", "n", "h")
    assert not any("fed as is" in n for n in trace.notes)
    assert loaded.adapter.eos_ids == (3,) and loaded.adapter.pad_id == 1
    rows = _rows(loaded)
    assert rows["vocabulary read from"] == "vocab.json (the 'itos' and 'stoi' entries of an object)"
    assert rows["input"].startswith("<sos> + the words of the text") and "unknown words -> <unk>" in rows["input"]


@pytest.mark.parametrize("where", ["upload", "folder"])
def test_training_dict_checkpoint_pt(where: str, tmp_path: Path, monkeypatch) -> None:
    """torch.save({"epoch": 7, "model_state_dict": …, "optimizer_state_dict": …, "loss": …}, "checkpoint.pt")."""
    vocab = ["<pad>", "<unk>", *WORDS]
    model = StudentLM(len(vocab), "lstm", seed=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.tensor([[2, 3, 4]]))[1].sum().backward()
    optimizer.step()  # a real optimizer state: exp_avg tensors for every parameter
    model.eval()
    files = {"checkpoint.pt": _torch_bytes({"epoch": 7, "model_state_dict": model.state_dict(),
                                            "optimizer_state_dict": optimizer.state_dict(), "loss": 1.234}),
             "vocab.json": _json({t: i for i, t in enumerate(vocab)})}
    mid = _upload(files) if where == "upload" else _folder(tmp_path, monkeypatch, files)
    loaded = load_model(mid)
    assert_gates_match(model, loaded)
    assert _rows(loaded)["weights"] == ("the 'model_state_dict' entry of a training checkpoint "
                                        "(also held: epoch, loss, optimizer_state_dict)")
    assert loaded.notes == ["The weights are the 'model_state_dict' entry of a training checkpoint (also held: epoch, "
                            "loss, optimizer_state_dict)."]
    assert not any("optimizer" in k or "exp_avg" in k for k in loaded.state_dict)


def test_lightning_ckpt_with_the_vocabulary_in_its_hyper_parameters(tmp_path: Path, monkeypatch) -> None:
    """A PyTorch Lightning .ckpt: {"state_dict": {"model.…": …}, "epoch", "global_step", "optimizer_states", …},
    the LightningModule's save_hyperparameters() holding the vocabulary list; no vocab.json."""
    vocab = ["<pad>", "<unk>", "<s>", "</s>", *WORDS]
    model = StudentLM(len(vocab), "gru", seed=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ckpt = {"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.4.0",
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "optimizer_states": [optimizer.state_dict()], "lr_schedulers": [], "callbacks": {}, "loops": {},
            "hyper_parameters": {"vocab": vocab, "lr": 0.1, "hidden": 12}}
    files = {"epoch=3-step=120.ckpt": _torch_bytes(ckpt)}
    for mid in (_upload(files), _folder(tmp_path, monkeypatch, files)):
        loaded = load_model(mid)
        trace = assert_gates_match(model, loaded)
        assert trace.tokens[0] == "<s>" and loaded.adapter.eos_ids == (3,)
        rows = _rows(loaded)
        assert rows["weights"].startswith("the 'state_dict' entry of a PyTorch Lightning checkpoint (also held: "
                                          "callbacks, epoch, global_step, hyper_parameters")
        assert rows["key prefix"] == "'model.' removed from every key (a wrapper module (e.g. a LightningModule's " \
                                     "self.model))"
        assert rows["vocabulary read from"] == ("the 'hyper_parameters.vocab' entry of epoch=3-step=120.ckpt "
                                                "(a list of tokens)")
        assert rows["embedding"] == "embedding.weight (18, 8)"


def test_data_parallel_module_prefix() -> None:
    vocab = ["<pad>", "<unk>", "<bos>", "<eos>", *WORDS]
    model = StudentLM(len(vocab), "lstm", batch_first=True, seed=4)
    wrapped = nn.DataParallel(model)  # on the CPU too its state dict says "module."
    state = wrapped.state_dict()
    assert all(k.startswith("module.") for k in state)
    uid = _upload({"dp.safetensors": _st(state), "vocab.json": _json(vocab)})
    loaded = load_model(uid)
    trace = assert_gates_match(model, loaded)
    assert trace.tokens[0] == "<bos>"
    assert _rows(loaded)["key prefix"] == "'module.' removed from every key (nn.DataParallel / DistributedDataParallel)"
    assert "rnn.weight_ih_l0" in loaded.state_dict and loaded.notes[0].startswith("Prefix 'module.' removed")


@pytest.mark.parametrize("saved, names, kept", [
    ("save_model", ("embedding", "fc"), "embedding.weight"),
    ("save_model", ("encoder", "decoder"), "decoder.weight"),
    ("torch.save", ("embedding", "fc"), "embedding.weight"),
])
def test_tied_input_and_output_embeddings(saved: str, names: tuple[str, str], kept: str, tmp_path: Path) -> None:
    """head.weight = embedding.weight: safetensors' save_model keeps one of the two names (embedding.weight beside
    fc.bias; decoder.weight beside decoder.bias for PyTorch's word_language_model naming), torch.save keeps both
    names on one storage. Either way the output layer is the embedding, and the logits are the model's."""
    vocab = ["<pad>", "<unk>", *WORDS]
    model = StudentLM(len(vocab), "lstm", tie=True, seed=5, names=names)
    if saved == "save_model":
        save_model(model, str(tmp_path / "tied.safetensors"))
        files = {"tied.safetensors": (tmp_path / "tied.safetensors").read_bytes()}
    else:
        files = {"tied.pt": _torch_bytes(model.state_dict())}
    loaded = load_model(_upload({**files, "vocab.json": _json(vocab)}))
    assert (kept in loaded.state_dict) and (len(loaded.state_dict) == (11 if saved == "torch.save" else 10))
    assert_gates_match(model, loaded)
    rows = _rows(loaded)
    assert rows["embedding"] == f"{kept} (16, 12)" and "tied" in rows["output layer"]
    assert loaded.adapter.can_generate


def test_char_level_vocabulary_without_unk_or_bos() -> None:
    """A character-level LM: its vocabulary is characters (no <unk>, no <bos>), so text is read character by
    character; characters it lacks are left out and listed; generated text is joined without spaces."""
    chars = ["<pad>", " ", *"abcdefghijklmnopqrstuvwxyz.,"]
    model = StudentLM(len(chars), "lstm", seed=6)
    loaded = load_model(_upload({"char_lm.safetensors": _st(model.state_dict()),
                                 "vocab.json": _json(chars)}))
    assert loaded.vocabs["vocab"].level == "char"
    trace = assert_gates_match(model, loaded, "The cat sat!")
    assert "".join(trace.tokens) == "the·cat·sat" and trace.n_unknown == 1  # a space character is shown ·
    notes = " ".join(trace.notes)
    assert "1 character(s) are not in the model's vocabulary, which has no unknown-token entry, so they are left " \
           "out: '!'." in notes and "fed as is" in notes
    rows = _rows(loaded)
    assert rows["vocabulary"].startswith("30 tokens, character-level, lowercase; no <unk>, <pad> id 0, no <bos>")
    run = D.decode_all(loaded, "the ca", (Strategy("greedy"),), max_new=6, stop_at_eos=False)
    out = run.generations[0].outputs[0]
    assert out.text == "".join(chars[i] for i in out.ids)


def test_hf_tokenizer_json_word_level() -> None:
    """A tokenizer.json made with the tokenizers library (WordLevel, lowercase normalizer, [PAD] [UNK] [CLS] [SEP]):
    text is split by the tokenizer itself, [CLS] is the beginning-of-sentence token, [UNK] the unknown one."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]",
                                                                                          "[SEP]"]))
    V = tok.get_vocab_size()
    model = StudentLM(V, "gru", seed=7)
    loaded = load_model(_upload({"weights.safetensors": _st(model.state_dict()),
                                 "tokenizer.json": tok.to_str().encode()}))
    trace = assert_gates_match(model, loaded, "The Dog sat on the zebra")
    expected = tok.encode("The Dog sat on the zebra", add_special_tokens=False).ids
    assert trace.ids == (tok.token_to_id("[CLS]"), *expected) and trace.tokens[-1] == "zebra→[UNK]"
    assert any("shown as [UNK]: zebra" in n for n in trace.notes)
    assert _rows(loaded)["vocabulary read from"] == "tokenizer.json (a Hugging Face tokenizer.json (WordLevel model))"


# ----------------------------------------------------------------------------------- the three views
@pytest.fixture(scope="module")
def no_bos_lm() -> tuple[StudentLM, list[str], str]:
    """The issue's model (list vocabulary, no <bos>/<eos>) registered as an upload for the page tests."""
    vocab = ["<pad>", "<unk>", *WORDS]
    model = StudentLM(len(vocab), "lstm", seed=8)
    uid = _upload({"student.safetensors": _st(model.state_dict()),
                   "vocab.json": _json(vocab)})
    yield model, vocab, uid
    forget_upload(uid)


def test_recurrent_cell_page_says_fed_as_is(no_bos_lm) -> None:
    model, vocab, uid = no_bos_lm
    at = run_page("app_pages/lstm_gates.py", {"model": uid, "text": "the dog sat on the quokka"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    warnings = _messages(at.warning)
    assert "fed as is" in warnings and "shown as <unk>: quokka" in warnings
    read = _messages(at.markdown)
    assert "no <bos>, no <eos>" in read and "`embedding.weight (16, 8)`" in read
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "heatmap"


def test_decoding_page_and_the_next_token_distribution(no_bos_lm) -> None:
    model, vocab, uid = no_bos_lm
    run = D.decode_all(load_model(uid), "the dog", (Strategy("greedy"),), max_new=5)
    ids = list(run.prompt_ids)
    assert ids == [vocab.index("the"), vocab.index("dog")]  # no <bos>: the prompt as typed
    out = run.generations[0].outputs[0]
    unk = vocab.index("<unk>")
    with torch.no_grad():  # greedy = argmax of the model's own logits over the words (<unk> left out), one at a time
        for new in out.ids:
            logits = model(torch.tensor([ids]))[1][0, -1]
            assert new == int(torch.argmax(logits.index_fill(0, torch.tensor([unk]), float("-inf"))))
            ids.append(new)
    sv = D.step_view(load_model(uid), run.prompt_ids, run.start_ids, out.ids, Strategy("greedy"), 2, 1.0)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([list(run.prompt_ids) + list(out.ids[:2])]))[1][0, -1], -1)
    np.testing.assert_allclose(sv.raw_probs, p[sv.ids].numpy(), atol=1e-6)
    # after the processors, which leave <unk> out: the model's own probability renormalised over the other tokens
    np.testing.assert_allclose(sv.chosen_prob, float(p[out.ids[2]] / (1 - p[unk])), atol=1e-6)
    at = run_page("app_pages/decoding_strategies.py",
                  {"model": uid, "text": "the dog", "strategies": "greedy,top-k", "max_new": "6"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    assert "fed as is" in _messages(at.info)


def test_word_embeddings_page_reads_the_embedding_table(no_bos_lm) -> None:
    model, vocab, uid = no_bos_lm
    table = E.embedding_table(load_model(uid))
    np.testing.assert_array_equal(table.vectors, model.emb.weight.detach().numpy())
    assert table.words == tuple(vocab) and [w for w, s in zip(table.words, table.special) if s] == ["<pad>", "<unk>"]
    at = run_page("app_pages/word_embeddings.py", {"model": uid, "text": "dog cat mat", "method": "pca"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    caption = _messages(at.caption)
    assert "embedding.weight (input embeddings)" in caption and "id order (the order of the vocabulary file)" in caption
    assert "Vocabulary: 16 tokens, word-level" in _messages(at.info)


def test_unknown_words_without_unk_are_listed_not_crashing() -> None:
    """No <unk> in the vocabulary: unknown words are left out and named; a prompt of only unknown words is a
    message on both pages."""
    vocab = WORDS
    model = StudentLM(len(vocab), "lstm", seed=9)
    uid = _upload({"nounk.safetensors": _st(model.state_dict()),
                   "vocab.json": _json(vocab)})
    trace = assert_gates_match(model, load_model(uid), "the wombat sat on the mat")
    assert trace.tokens == ("the", "sat", "on", "the", "mat")
    at = run_page("app_pages/lstm_gates.py", {"model": uid, "text": "the wombat sat on the mat"})
    assert_no_exception(at)
    assert "so they are left out: wombat." in _messages(at.warning)
    at = run_page("app_pages/lstm_gates.py", {"model": uid, "text": "quokka wombat"})
    assert_no_exception(at)
    assert "left out: quokka, wombat." in _messages(at.info)
    at = run_page("app_pages/decoding_strategies.py",
                  {"model": uid, "text": "quokka wombat", "strategies": "greedy,top-k"})
    assert_no_exception(at)
    assert "left out: quokka, wombat." in _messages(at.error)


# ------------------------------------------------------------------------------------ vocabulary files
@pytest.mark.parametrize("saved, source", [
    (["<unk>", "<pad>", "the", "dog"], "a list of tokens"),
    ({"the": 2, "<pad>": 1, "<unk>": 0, "dog": 3}, "a {token: id} map"),
    ({"0": "<unk>", "1": "<pad>", "2": "the", "3": "dog"}, "an {id: token} map"),
    ({"word2idx": {"<unk>": 0, "<pad>": 1, "the": 2, "dog": 3},
      "idx2word": {"0": "<unk>", "1": "<pad>", "2": "the", "3": "dog"}}, "the 'word2idx' and 'idx2word' entries"),
    ({"vocab": ["<unk>", "<pad>", "the", "dog"], "freqs": {"the": 9, "dog": 2}, "lower": True}, "the 'vocab' entry"),
])
def test_vocabulary_shapes_keep_their_ids(saved: object, source: str) -> None:
    from explorer.data.vocab_files import read_vocabulary

    v = read_vocabulary(saved)
    assert v.itos == ["<unk>", "<pad>", "the", "dog"] and (v.unk_id, v.pad_id, v.bos_id) == (0, 1, None)
    assert v.source.startswith(source)
    assert v.freq == ({"the": 9, "dog": 2} if "freqs" in str(saved) else {})


def test_vocabulary_files_that_disagree_or_compete_are_named() -> None:
    from explorer.data.vocab_files import find_vocabulary, read_vocabulary

    with pytest.raises(ValueError, match="the entries 'itos' and 'stoi' are two different vocabularies"):
        read_vocabulary({"itos": ["a", "b"], "stoi": {"b": 0, "a": 1}})
    with pytest.raises(ValueError, match="'vocab.json' is not a valid vocabulary: vocabulary has duplicate tokens"):
        find_vocabulary({"vocab.json": ["a", "a"]}, {}, {2})
    hyper = {"num_layers": 1, "dropout": 0}  # reads as a 2-token {token: id} map, but no matrix has 2 rows
    assert find_vocabulary({"config.json": hyper}, {}, {16}) is None
    with pytest.raises(ValueError, match="several vocabularies fit these weights: words.json .*; chars.json"):
        find_vocabulary({"words.json": list("abc"), "chars.json": ["x", "y", "z"]}, {}, {3})


def test_a_folder_with_a_config_json_of_hyper_parameters(tmp_path: Path, monkeypatch) -> None:
    """A student's folder: model.pt, word2idx.json and config.json of hyper-parameters (no model_type: not a
    Hugging Face model), loaded as a checkpoint folder."""
    vocab = ["<pad>", "<unk>", "<sos>", "<eos>", *WORDS]
    model = StudentLM(len(vocab), "gru", seed=11)
    mid = _folder(tmp_path, monkeypatch, {
        "model.pt": _torch_bytes({"net": model.state_dict(), "epoch": 2}),
        "word2idx.json": _json({t: i for i, t in enumerate(vocab)}),
        "config.json": _json({"emb_dim": 8, "hidden": 12, "num_layers": 2, "cell": "gru"})})
    loaded = load_model(mid)
    assert_gates_match(model, loaded)
    rows = _rows(loaded)
    assert rows["vocabulary read from"] == "word2idx.json (a {token: id} map)"
    assert rows["weights"] == "the 'net' entry of a training checkpoint (also held: epoch)"


# ------------------------------------------------------------------------------ files that cannot be read
def test_a_training_dict_without_weights_names_what_it_found() -> None:
    optimizer = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    data = _torch_bytes({"epoch": 7, "optimizer_state_dict": optimizer.state_dict(), "loss": 0.5})
    with pytest.raises(CorruptFileError) as info:
        register_upload([("checkpoint.pt", data)])
    assert str(info.value) == (
        "'checkpoint.pt' holds no tensors: found epoch (int), optimizer_state_dict (dict of 2), loss (float). "
        "Expected a state dict (parameter name -> tensor, as saved by torch.save(model.state_dict(), ...)) or a "
        "training checkpoint with one such entry (model_state_dict, state_dict, model, net, ...).")


def test_a_whole_pickled_model_is_refused_and_named() -> None:
    with pytest.raises(UnsafeFileError, match=r"it holds a torch\.nn\.modules\.linear\.Linear object"):
        register_upload([("model.pt", _torch_bytes(nn.Linear(2, 2)))])


def test_weights_the_view_cannot_read_name_keys_and_shapes() -> None:
    vocab = ["<pad>", "<unk>", *WORDS]
    model = StudentLM(len(vocab), "lstm", seed=10)
    state = {"embedding.weight": model.emb.weight, "conv.weight": torch.zeros(4, 8, 3),
             "fc.weight": model.head.weight}
    uid = _upload({"noconv.safetensors": _st(state), "vocab.json": _json(vocab)})
    with pytest.raises(RNNGatesError, match=r"found: conv\.weight \(4, 8, 3\), embedding\.weight \(16, 8\), "
                                            r"fc\.weight \(16, 12\)\."):
        rnn_gates(load_model(uid), "the dog")
    uid = _upload({"wrong.safetensors": _st(model.state_dict()), "vocab.json": _json(vocab[:-2])})
    with pytest.raises(RNNGatesError, match=r"14 tokens but the embedding matrix has 16 rows \('embedding\.weight' "
                                            r"\(16, 8\)\)"):
        rnn_gates(load_model(uid), "the dog")
