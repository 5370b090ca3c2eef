"""The recomputed gates equal torch.nn.LSTM / GRU / RNN outputs; user state dicts are inferred or refused clearly."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from explorer.adapters.recurrent import infer_recurrent, recompute, weights_of
from explorer.data.vocab import Vocab
from explorer.loading.loaders import LoadedModel
from explorer.models.rnn_lm import RNNLanguageModel
from explorer.probes.lstm_gates import RNNGatesError, cell_terms, compare, rnn_gates, saturation, unit_order

TOL = 1e-5
WORDS = ["the", "key", "keys", "to", "cabinet", "cabinets", "is", "are", "on", "table", "."]
MAX_ERRORS: dict[str, float] = {}


def _module(kind: str, layers: int, bidirectional: bool, E: int = 7, H: int = 5, nonlinearity: str = "tanh"):
    torch.manual_seed(layers * 10 + bidirectional + len(kind))
    cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
    extra = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
    m = cls(E, H, layers, bidirectional=bidirectional, batch_first=True, **extra).double().float()
    bound = 0.5 if nonlinearity == "relu" else 1.0  # relu is unbounded: keep its activations O(1)
    with torch.no_grad():  # larger weights than the default init so gates saturate and errors would show
        for p in m.parameters():
            p.uniform_(-bound, bound)
    return m.eval()


def _stacked(m: nn.RNNBase, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The recomputed states of module m over x (T, E): name -> (layers, directions, T, H)."""
    layers = recompute(weights_of(m), x)
    return {name: torch.stack([torch.stack([d[name] for d in dirs]) for dirs in layers])
            for name in layers[0][0] if name not in ("x_part", "h_part")}


def _final_states(states: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """(layers*dirs, H) like nn.LSTM's h_n: forward ends at T-1, backward at 0."""
    s = states[name]
    L, D = s.shape[:2]
    return torch.stack([s[layer, d, -1 if d == 0 else 0] for layer in range(L) for d in range(D)])


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn-tanh", "rnn-relu"])
def test_recompute_matches_torch(kind: str, layers: int, bidirectional: bool) -> None:
    cell, _, nonlin = kind.partition("-")
    m = _module(cell, layers, bidirectional, nonlinearity=nonlin or "tanh")
    x = torch.randn(1, 9, 7)
    with torch.no_grad():
        out, hidden = m(x)
    states = _stacked(m, x[0])
    h_n, c_n = hidden if cell == "lstm" else (hidden, None)
    D = 2 if bidirectional else 1
    top = torch.cat([states["h"][-1, d] for d in range(D)], dim=-1)
    errs = [(top - out[0]).abs().max(), (_final_states(states, "h") - h_n[:, 0]).abs().max()]
    if c_n is not None:
        errs.append((_final_states(states, "c") - c_n[:, 0]).abs().max())
    err = float(max(errs))
    MAX_ERRORS[kind] = max(MAX_ERRORS.get(kind, 0.0), err)
    assert err < TOL, err
    for name, s in states.items():
        assert s.shape == (layers, D, 9, 5), name
    if cell == "lstm":  # the gates are consistent with the cell equations
        i, f, g, o, c = (states[k] for k in "ifgoc")
        assert (i >= 0).all() and (i <= 1).all() and (g.abs() <= 1).all()
        assert torch.allclose(c[..., 1:, :][:, 0], (f * torch.roll(c, 1, 2) + i * g)[..., 1:, :][:, 0], atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_batch_of_different_lengths(kind: str, bidirectional: bool) -> None:
    m = _module(kind, 2, bidirectional)
    lengths = [8, 5, 2]
    x = torch.randn(3, 8, 7)
    with torch.no_grad():
        packed, _ = m(pack_padded_sequence(x, torch.tensor(lengths), batch_first=True, enforce_sorted=False))
    out, _ = pad_packed_sequence(packed, batch_first=True)
    D = 2 if bidirectional else 1
    for b, T in enumerate(lengths):
        states = _stacked(m, x[b, :T])
        top = torch.cat([states["h"][-1, d] for d in range(D)], dim=-1)
        err = float((top - out[b, :T]).abs().max())
        MAX_ERRORS[f"packed-{kind}"] = max(MAX_ERRORS.get(f"packed-{kind}", 0.0), err)
        assert err < TOL, (b, err)


# ------------------------------------------------------------------------------------ loaded models
class _Encoder(nn.Module):
    def __init__(self, E: int, H: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(E, H, 2, batch_first=True)


class UserLM(nn.Module):
    """A typical user model: embedding + 2-layer LSTM (nested) + linear head, with its own names."""

    def __init__(self, V: int, E: int = 6, H: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.encoder = _Encoder(E, H)
        self.fc = nn.Linear(H, V)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, _ = self.encoder.lstm(self.emb(ids))
        return out, self.fc(out)


def _vocab() -> Vocab:
    return Vocab(WORDS)


def _state_dict_model(vocab: Vocab | None = None, state: dict | None = None,
                      model_id: str = "local:user") -> LoadedModel:
    vocabs = {"vocab": vocab} if vocab is not None else {}
    return LoadedModel(model_id, "state-dict", None, "cpu", "float32", {"source": "state-dict"}, vocabs=vocabs,
                       state_dict=state)


def test_user_state_dict_is_inferred_and_matches() -> None:
    torch.manual_seed(0)
    vocab = _vocab()
    user = UserLM(len(vocab)).eval()
    state = {k: v.clone() for k, v in user.state_dict().items()}
    rec = infer_recurrent(state)
    assert (rec.cell, rec.num_layers, rec.num_directions, rec.hidden_size, rec.input_size) == ("lstm", 2, 1, 8, 6)
    inferred = dict(rec.inferred)
    assert inferred["embedding"].startswith("emb.weight") and inferred["output layer"].startswith("fc.weight")
    assert "encoder.lstm.weight_ih_l0" in inferred["recurrent weights"]

    loaded = _state_dict_model(vocab, state)
    trace = rnn_gates(loaded, "The keys to the cabinet are on the table.")
    ids = torch.tensor([trace.ids])
    with torch.no_grad():
        out, logits = user(ids)
    err = float(np.abs(trace.gates["h"][-1, 0] - out[0].numpy()).max())
    MAX_ERRORS["user-state-dict"] = err
    assert err < TOL and trace.max_abs_error < TOL
    probs = torch.softmax(logits[0], -1)
    unk = vocab.unk_id  # the unknown-word token: its probability in a column of its own, not among the next words
    top = probs.index_fill(-1, torch.tensor([unk]), -1.0).topk(5, dim=-1)
    np.testing.assert_array_equal(trace.next_ids, top.indices.numpy())
    np.testing.assert_allclose(trace.next_probs, probs.gather(-1, top.indices).numpy(), atol=1e-6)
    np.testing.assert_allclose(trace.unknown_probs, probs[:, unk].numpy(), atol=1e-6)
    assert trace.next_tokens[0] == tuple(vocab.decode(top.indices[0].tolist()))


def test_uploaded_state_dict_loads_through_the_registry() -> None:
    import json

    from safetensors.torch import save

    from explorer.loading.loaders import load_model
    from explorer.loading.uploads import forget_upload, register_upload

    torch.manual_seed(5)
    vocab = _vocab()
    user = UserLM(len(vocab)).eval()
    files = [("weights.safetensors", save({k: v.contiguous() for k, v in user.state_dict().items()})),
             ("vocab.json", json.dumps({tok: i for i, tok in enumerate(vocab.itos)}).encode())]
    uid = register_upload(files)
    try:
        loaded = load_model(uid)
        assert loaded.family == "state-dict"
        trace = rnn_gates(loaded, "the keys are on the table")
        with torch.no_grad():
            out, _ = user(torch.tensor([trace.ids]))
        assert np.abs(trace.gates["h"][-1, 0] - out[0].numpy()).max() < TOL
    finally:
        forget_upload(uid)


def test_bidirectional_gru_state_dict_with_other_prefix() -> None:
    torch.manual_seed(1)
    vocab = _vocab()
    emb = nn.Embedding(len(vocab), 4)
    gru = nn.GRU(4, 3, 3, bidirectional=True, batch_first=True)
    state = {"model.word_embeddings.weight": emb.weight.detach()}
    state.update({f"model.rnn.{k}": v.detach() for k, v in gru.state_dict().items()})
    state["model.classifier.weight"] = torch.randn(2, 6)  # a 2-class head, not a language model
    trace = rnn_gates(_state_dict_model(vocab, state), "the key is on the table")
    with torch.no_grad():
        out, _ = gru(emb(torch.tensor([trace.ids])))
    h = np.concatenate([trace.gates["h"][-1, 0], trace.gates["h"][-1, 1]], axis=-1)
    assert np.abs(h - out[0].numpy()).max() < TOL
    assert trace.names == ("r", "z", "n", "h") and trace.next_ids.shape == (7, 0)  # <bos> + 6 words


def test_builtin_style_model_matches_and_leaves_no_state() -> None:
    torch.manual_seed(2)
    vocab = _vocab()
    model = RNNLanguageModel(len(vocab), 6, 10, num_layers=2, cell="lstm").eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loaded = LoadedModel("builtin:test", "rnn-lm", model, "cpu", "float32", vocabs={"vocab": vocab})
    trace = rnn_gates(loaded, "the keys to the cabinets are on the table .")
    with torch.no_grad():
        logits, _ = model(torch.tensor([trace.ids]))
    top = torch.softmax(logits[0], -1).topk(5, -1)
    np.testing.assert_allclose(trace.next_probs, top.values.numpy(), atol=1e-6)
    assert trace.max_abs_error < TOL
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not model._forward_hooks and not model.rnn._forward_hooks


def test_cell_terms_fill_the_equations() -> None:
    torch.manual_seed(3)
    vocab = _vocab()
    model = RNNLanguageModel(len(vocab), 6, 10, num_layers=2, cell="lstm").eval()
    loaded = LoadedModel("builtin:test", "rnn-lm", model, "cpu", "float32", vocabs={"vocab": vocab})
    trace = rnn_gates(loaded, "the keys to the cabinets are on the table .")
    sig = lambda a: 1 / (1 + math.exp(-a))  # noqa: E731
    for layer, t, j in [(0, 0, 3), (1, 4, 7)]:
        terms = cell_terms(trace, layer, 0, t, j)
        a = {g: terms.x_part[g] + terms.h_part[g] for g in "ifgo"}
        assert abs(sig(a["i"]) - terms.value["i"]) < 1e-5 and abs(math.tanh(a["g"]) - terms.value["g"]) < 1e-5
        c = terms.value["f"] * terms.prev["c"] + terms.value["i"] * terms.value["g"]
        assert abs(c - terms.value["c"]) < 1e-5
        assert abs(terms.value["o"] * math.tanh(c) - terms.value["h"]) < 1e-5
    gru = RNNLanguageModel(len(vocab), 6, 10, cell="gru").eval()
    gl = LoadedModel("builtin:g", "rnn-lm", gru, "cpu", "float32", vocabs={"vocab": vocab})
    gt = rnn_gates(gl, "the keys are on the table")
    terms = cell_terms(gt, 0, 0, 2, 1)
    n = math.tanh(terms.x_part["n"] + terms.value["r"] * terms.h_part["n"])
    assert abs(n - terms.value["n"]) < 1e-5
    assert abs((1 - terms.value["z"]) * n + terms.value["z"] * terms.prev["h"] - terms.value["h"]) < 1e-5


# ----------------------------------------------------------------------------------------- bad input
def _small_loaded() -> LoadedModel:
    torch.manual_seed(4)
    vocab = _vocab()
    return LoadedModel("builtin:test", "rnn-lm", RNNLanguageModel(len(vocab), 4, 6).eval(), "cpu", "float32",
                       vocabs={"vocab": vocab})


@pytest.mark.parametrize("text", ["", "   ", "\x00\x07\u200b"])
def test_empty_text_gives_empty_trace_with_note(text: str) -> None:
    trace = rnn_gates(_small_loaded(), text)
    assert len(trace) == 0 and trace.gates["h"].shape == (1, 1, 0, 6)
    assert any("Type a sentence" in n for n in trace.notes)
    assert saturation(trace, 0) == {}


@pytest.mark.parametrize("text", ["zebra quokka 🦘", "Привет мир 你好", "a\x00b\x1bc 👍🏽 \u202e"])
def test_unknown_scripts_and_emoji_become_unk(text: str) -> None:
    trace = rnn_gates(_small_loaded(), text)
    assert trace.tokens[0] == "<bos>" and trace.special[0] and all(t.endswith("→<unk>") for t in trace.tokens[1:])
    assert len(set(trace.ids[1:])) == 1  # one id, the model's <unk>; each label says what was typed
    assert trace.n_unknown == len(trace) - 1
    assert any("<unk>" in n for n in trace.notes)
    assert np.isfinite(trace.gates["h"]).all()


def test_very_long_text_is_truncated() -> None:
    trace = rnn_gates(_small_loaded(), "the key is on the table . " * 400)
    assert len(trace) == 512 and trace.truncated and any("first 511" in n for n in trace.notes)


def test_state_dict_without_rnn_weights_is_refused_clearly() -> None:
    state = {"fc.weight": torch.zeros(3, 4), "emb.weight": torch.zeros(15, 4)}
    with pytest.raises(RNNGatesError, match="weight_ih_l0"):
        rnn_gates(_state_dict_model(_vocab(), state), "the key")


def test_vocab_that_does_not_match_the_embedding_is_refused_clearly() -> None:
    user = UserLM(len(_vocab()) + 3)
    with pytest.raises(RNNGatesError, match=r"15 tokens but the embedding matrix has 18 rows"):
        rnn_gates(_state_dict_model(_vocab(), user.state_dict()), "the key")
    with pytest.raises(RNNGatesError, match="vocab.json"):
        rnn_gates(_state_dict_model(None, UserLM(15).state_dict()), "the key")


@pytest.mark.parametrize("mutate, expected", [
    (lambda s: s.update({"encoder.lstm.weight_hh_l0": torch.zeros(10, 8)}), r"\(G\*H, H\)|shape"),
    (lambda s: s.pop("encoder.lstm.weight_ih_l1"), "Missing 'encoder.lstm.weight_ih_l1'"),
    (lambda s: s.update({"encoder.lstm.weight_ih_l1": torch.zeros(32, 5)}), "expected \\(32, 8\\)|inputs of size 5"),
    (lambda s: s.pop("emb.weight"), "No embedding matrix"),
    (lambda s: s.update({"encoder.lstm.bias_ih_l0": torch.zeros(7)}), "bias_ih_l0"),
])
def test_broken_state_dicts_name_the_key(mutate, expected: str) -> None:
    state = dict(UserLM(len(_vocab())).state_dict())
    mutate(state)
    with pytest.raises(RNNGatesError, match=expected):
        rnn_gates(_state_dict_model(_vocab(), state), "the key")


# ------------------------------------------------------------------------------------- unit analysis
def test_saturation_unit_order_and_compare() -> None:
    loaded = _small_loaded()
    a = rnn_gates(loaded, "the key to the cabinets is on the table .")
    b = rnn_gates(loaded, "the keys to the cabinets are on the table .")
    sat = saturation(a, 0)
    assert set(sat) == {"i", "f", "o"}
    left, right = sat["f"]
    f = a.gates["f"][0, 0]
    np.testing.assert_allclose(left, (f < 0.1).mean(0))
    np.testing.assert_allclose(right, (f > 0.9).mean(0))
    h = a.gates["h"][0, 0]
    order = unit_order(h, "variance", 3)
    assert list(order) == list(np.argsort(-h.var(0), kind="stable")[:3])
    assert list(unit_order(h, "index")) == list(range(6))
    cmp = compare(a, b, "h", 0)
    assert cmp.start == 2 and cmp.diff.shape == (11, 6)  # <bos> the key(s) ...
    np.testing.assert_allclose(cmp.diff, b.gates["h"][0, 0] - h)
    assert (cmp.diff[:2] == 0).all()  # identical prefix "<bos> the": no difference yet


def test_report_max_errors() -> None:
    """Printed with -s: the largest |recomputed − torch| seen per kind (computed here when run alone)."""
    if not MAX_ERRORS:
        test_recompute_matches_torch("lstm", 2, True)
    print("\nmax abs error vs torch:", {k: f"{v:.2e}" for k, v in sorted(MAX_ERRORS.items())})
    assert MAX_ERRORS and max(MAX_ERRORS.values()) < TOL


def test_figures_are_valid_plotly_and_escape_user_text() -> None:
    """The figure builders skip Plotly's validation for speed: validate every figure here instead."""
    import plotly.graph_objects as go

    from explorer.viz import lstm_gates as V
    from explorer.viz.theme import PROJECTOR, apply

    loaded = _small_loaded()
    a = rnn_gates(loaded, "the key to the cabinets is on the table .")
    b = rnn_gates(loaded, "the keys to the cabinets are on the table .")
    units = unit_order(a.gates["c"][0, 0], "saturation", 4)
    cmp = compare(a, b, "h", 0)
    figs = [V.gate_heatmap(a, "c", 0, 0, units), V.gate_heatmap(a, "f", 0, 0, units), V.unit_lines(a, 0, 0, 2),
            V.saturation_scatter(saturation(a, 0)), V.diff_heatmap(cmp, cmp.order)]
    for fig in figs:
        go.Figure(fig.to_dict())  # raises ValueError on any invalid property
        apply(fig, PROJECTOR)
    np.testing.assert_array_equal(np.asarray(figs[0].data[0].z), a.gates["c"][0, 0][:, units])
    html = V.colored_tokens_html(["<script>alert(1)</script>", "a&b", '"q"'], np.array([0.5, -0.5, 0.0]))
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&amp;b" in html
    assert V.token_labels(["<b>", "x"]) == ["0 · &lt;b&gt;", "1 · x"]
    for cell, text in [("lstm", "the key"), ("gru", "the key"), ("rnn", "the key")]:
        vocab = _vocab()
        lm = LoadedModel("builtin:x", "rnn-lm", RNNLanguageModel(len(vocab), 4, 6, cell=cell).eval(), "cpu", "float32",
                         vocabs={"vocab": vocab})
        latex = V.equations_latex(cell_terms(rnn_gates(lm, text), 0, 0, 1, 2))
        assert latex.startswith(r"\begin{aligned}") and latex.count("&=") == {"lstm": 6, "gru": 4, "rnn": 1}[cell]


@pytest.mark.parametrize("projector", [False, True], ids=["normal", "projector"])
@pytest.mark.parametrize("name", ["c", "f"])
def test_the_coloured_sentence_uses_the_heatmaps_palette(name, projector):
    """One palette for one quantity: a token's background is the heatmap's colour scale at its value (diverging for
    c, sequential for a gate), in normal and projector mode, and the caption's words name that palette."""
    from plotly.colors import sample_colorscale

    from explorer.viz import lstm_gates as V
    from explorer.viz.theme import get_theme

    theme = get_theme(projector)
    scale = V.state_colorscale(name, theme)
    assert scale == (theme.sequential if name == "f" else theme.diverging)
    lo, hi = (0.0, 1.0) if name == "f" else (-2.0, 2.0)
    markup = V.colored_tokens_html(["low", "high"], np.array([lo, hi]), lo, hi, scale)
    for at in (0.0, 1.0):
        rgb = sample_colorscale(scale, [at])[0].replace(" ", "")
        assert f"background:{rgb}" in markup, (rgb, markup)
    words = V.scale_words(name, theme)
    assert (theme.diverging_ends[1] in words) if name == "c" else (theme.sequential in words)
