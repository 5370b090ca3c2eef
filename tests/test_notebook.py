"""explorer.nb, the views in a notebook: each function's figures hold the model's own numbers (checked against the
framework: torch's LSTM, transformers' attentions, a forward pass), for catalogue ids and for objects in memory (a
student's nn.Module, a Hugging Face model with its tokenizer); no Streamlit is imported."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

from explorer import nb
from families import GPT2_SMALL, make_tokenizer, tiny_model
from plotly_arrays import plotly_array

WORDS = ["<unk>", "<bos>", "<eos>", "the", "dog", "dogs", "runs", "run", "cat", "cats", "and", "."]
TEXT = "the keys to the cabinet are on the table"


class StudentLM(nn.Module):
    """What a course's notebook trains: an embedding, an nn.LSTM and a linear output layer."""

    def __init__(self, vocab: int, emb: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, emb), nn.LSTM(emb, hidden, batch_first=True), \
            nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(ids))[0])


def _z(fig, i: int = 0) -> np.ndarray:
    return plotly_array(fig.to_plotly_json()["data"][i]["z"])


def test_the_notebook_api_imports_no_streamlit() -> None:
    code = "import sys, explorer.nb as nb; nb.lstm_gates('builtin:lstm-lm', 'the dog'); " \
           "assert 'streamlit' not in sys.modules, 'streamlit imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_a_students_lstm_in_memory_is_read_like_an_upload_and_its_states_are_torchs() -> None:
    torch.manual_seed(0)
    model = StudentLM(len(WORDS)).eval()
    r = nb.lstm_gates(model, "the dog runs and the cats run", vocab=WORDS, gate="h", top=32, sort="index")
    assert r.model_id.startswith("memory:StudentLM-") and "as an uploaded checkpoint is" in r.notes[0]
    assert any(row["what"] for row in r.tables["what was read from the model"])
    ids = torch.tensor([[WORDS.index(t) for t in r.trace.tokens]])
    with torch.inference_mode():
        h = model.rnn(model.emb(ids))[0][0].numpy()  # (T, H): torch's own LSTM
    np.testing.assert_allclose(r.trace.gates["h"][0, 0], h, atol=1e-5)
    np.testing.assert_allclose(_z(r["heatmap"]), h[:, np.arange(32)], atol=1e-5)
    # decoding the same object: greedy is the argmax of its own logits, token by token
    d = nb.decoding_strategies(model, "the dog", vocab=WORDS, strategies=("greedy",), max_new=4, eos=False)
    out = d.trace.generations[0].outputs[0].ids
    seq = list(d.trace.prompt_ids)
    with torch.inference_mode():
        for t in out:
            assert t == int(model(torch.tensor([seq]))[0, -1].argmax())
            seq.append(t)


def test_a_hugging_face_model_in_memory_gives_its_own_attentions() -> None:
    tok = make_tokenizer()
    model = tiny_model("GPT2LMHeadModel", len(tok), seed=0, n_positions=32, **GPT2_SMALL, n_head=2,
                       attn_implementation="sdpa").eval()
    r = nb.self_attention(model, "the dog runs", tokenizer=tok, layer=1, head=1)
    assert "Read as a Hugging Face decoder (GPT2LMHeadModel" in r.notes[0]
    assert any("switched to eager" in n for n in r.notes)
    assert model.config._attn_implementation == "sdpa"  # the caller's model as it was
    model.set_attn_implementation("eager")  # for its own attention weights, independently of the view
    enc = tok("the dog runs", return_tensors="pt")
    with torch.inference_mode():
        att = model(**enc, output_attentions=True).attentions[1][0, 1].numpy()
    np.testing.assert_allclose(_z(r["head_heatmap"]), att, atol=1e-6)
    lens = nb.logit_lens(model, "the dog runs", tokenizer=tok)
    with torch.inference_mode():
        probs = torch.softmax(model(**enc).logits[0], -1).max(-1).values.numpy()
    np.testing.assert_allclose(lens.trace.top_probs[-1], probs, atol=1e-5)  # the last layer is the model's output


def test_each_view_of_the_catalogue_models() -> None:
    from explorer.loading.loaders import load_model
    from explorer.training.curves import recorded

    r = nb.logit_lens("builtin:tiny-gpt", TEXT)
    np.testing.assert_allclose(_z(r["lens_grid"]), r.trace.top_probs, atol=1e-6)
    a = nb.token_attribution("builtin:tiny-gpt", TEXT, steps=16)
    np.testing.assert_allclose(_z(a["attribution"]), a.trace.integrated, atol=1e-6)
    g = nb.gradients_through_time(["builtin:lstm-lm", "builtin:gru-lm"], TEXT)
    assert [t.cell for t in g.trace] == ["LSTM", "GRU"] and len(g["gradients"].data) >= 2
    m = nb.masked_words("builtin:masked-lm", "the keys to the cabinet [MASK] on the table .")
    loaded = load_model("builtin:masked-lm", task="masked-lm")
    enc = loaded.adapter.encode("the keys to the cabinet [MASK] on the table .")
    p = torch.softmax(torch.as_tensor(loaded.adapter.run(enc, names=("logits",))["logits"][m.trace.positions[0]]), -1)
    np.testing.assert_allclose(plotly_array(m["fill-0"].to_plotly_json()["data"][0]["x"]),
                               p.numpy()[m.trace.top_ids[0]], atol=1e-6)
    i = nb.interventions("builtin:tiny-gpt", "the keys to the cabinet", "the key to the cabinet", "are", "is")
    np.testing.assert_allclose(_z(i["patch_grid"]), i.trace.restored, atol=1e-6)
    assert i.trace.restored[-1, -1] == pytest.approx(1.0, abs=1e-4)  # the last layer's last position: all of it
    s = nb.seq2seq("builtin:seq2seq-bahdanau", "the dog runs")
    np.testing.assert_allclose(_z(s["alignment"]).sum(axis=1), 1.0, atol=1e-5)  # each output's weights sum to 1
    w = nb.word_embeddings("builtin:lstm-lm", words="dog cat", nn="dog", k=5)
    assert len(w.tables["neighbours"]) == 5 and w.tables["neighbours"][0]["word"] != "dog"
    pe = nb.positional_encodings()  # the sinusoidal panel: what the page says under the table
    assert pe.notes[0].startswith("The square marks position 10, dimension 8 (pair 4): PE = ")
    np.testing.assert_allclose(_z(pe["pe_heatmap"])[3, :2], [np.sin(3.0), np.cos(3.0)], atol=1e-6)
    c = nb.training_curves("builtin:lstm-lm")
    np.testing.assert_allclose(c.trace.curves["held-out loss"], recorded("builtin:lstm-lm").curves["held-out loss"])
    d = nb.decoding_strategies("builtin:tiny-gpt", "the dog", strategies=("greedy", "beam"), max_new=5)
    assert [row["strategy"] for row in d.tables["outputs"]][:1] == ["Greedy"]


def test_bad_input_is_a_message() -> None:
    with pytest.raises(nb.NotebookError, match="catalogue id"):
        nb.lstm_gates(42, "the dog")
    with pytest.raises(nb.NotebookError):
        nb.lstm_gates("builtin:tiny-gpt", "the dog")  # not recurrent: the view's own message
    with pytest.raises(nb.NotebookError, match="Unknown strategies"):
        nb.decoding_strategies("builtin:lstm-lm", "the dog", strategies=("greedy", "nonsense"))
    with pytest.raises(nb.NotebookError, match="layers"):
        nb.self_attention("builtin:tiny-gpt", "the dog", layer=99)


@pytest.mark.parametrize("name", ["gpt2", "bert", "roberta", "t5", "bart", "marian"])
def test_hugging_face_families_in_memory_give_their_own_attentions(name: str) -> None:
    from families import tiny

    model, tok, family = tiny(name)
    r = nb.self_attention(model, "the dog runs", tokenizer=tok, layer=1, head=3)
    enc = tok("the dog runs", return_tensors="pt")
    with torch.inference_mode():
        if family == "encoder-decoder":  # the view's first stream is the encoder's self-attention
            out = model(**enc, decoder_input_ids=enc["input_ids"], output_attentions=True)
            own = out.encoder_attentions[1][0, 3].numpy()
        else:
            own = model(**enc, output_attentions=True).attentions[1][0, 3].numpy()
    np.testing.assert_allclose(_z(r["head_heatmap"]), own, atol=1e-6)
    assert f"Read as a Hugging Face {family}" in r.notes[0]
    if family == "encoder-decoder":
        s = nb.seq2seq(model, "the dog runs", tokenizer=tok)
        np.testing.assert_allclose(_z(s["alignment"]).sum(axis=1), 1.0, atol=1e-5)


# Each notebook function and the view it draws; parameters of the same name take the page's default. Where the two
# say "not set" in their own way (the page's selectbox needs a value, a Python default is None or ""), both mean the
# same and are listed.
NB_VIEWS = {"lstm_gates": "lstm-gates", "self_attention": "self-attention", "positional_encodings":
            "positional-encodings", "word_embeddings": "word-embeddings", "decoding_strategies": "decoding-strategies",
            "logit_lens": "logit-lens", "token_attribution": "token-attribution", "gradients_through_time":
            "gradients-through-time", "masked_words": "masked-words", "interventions": "interventions",
            "seq2seq": "seq2seq", "training_curves": "training-curves", "classify": "decision", "tag": "decision"}
NOT_SET = {("lstm_gates", "unit"): "None: the unit the page picks (its default 0)",
           ("lstm_gates", "gate"): "None: the page's c where the cell has one, else h (a GRU, an Elman RNN)",
           ("lstm_gates", "compare"): "None: no second model (the page: none)",
           ("masked_words", "compare"): "None: no second model (the page: none)",
           ("self_attention", "pair"): "'' and None: no second segment",
           ("self_attention", "stream"): "'': the model's own (the page: encoder)",
           ("self_attention", "token"): "None: the page's query token (\"it\" or the last word; -1: all)",
           ("self_attention", "compare"): "None: no second model (the page: none)",
           ("positional_encodings", "model"): "None: the formulas alone (the page opens on MiniLM)",
           ("token_attribution", "target"): "'' and None: the model's own prediction",
           ("token_attribution", "outputs"): "None: the page's default_outputs (the prediction alone on a large LM)",
           ("positional_encodings", "text"): "'' and None: no sentence",
           ("positional_encodings", "panel"): "None: the panel the arguments ask for (a sentence, a model's positions, "
                                              "else the sinusoidal table)",
           ("positional_encodings", "compare"): "None: no second model (the page: none)",
           ("word_embeddings", "s1"): "None: the model's own pair (contextual_embeddings.drift_pair), as the page's",
           ("word_embeddings", "s2"): "None: the model's own pair (contextual_embeddings.drift_pair), as the page's",
           ("word_embeddings", "dw"): "None: the model's own pair (contextual_embeddings.drift_pair), as the page's",
           ("word_embeddings", "compare"): "None: no second model (the page: none)",
           ("seq2seq", "layer"): "None: the page's last layer of a Hugging Face encoder-decoder (0 of a recurrent one)",
           ("seq2seq", "panel"): "None: the page's (the beam tree after a beam search, else the step)",
           ("seq2seq", "model2"): "None: no second model (the page: none)",
           ("decoding_strategies", "view_t"): "None: the page's (the column's temperature where it samples, else 1)",
           ("decoding_strategies", "compare"): "None: no second model (the page: none)",
           ("interventions", "compare"): "None: no second model (the page: none)",
           ("classify", "label"): "None and -1: the chosen label", ("classify", "foil"): "None and -1: no foil",
           ("tag", "label"): "None and -1: the chosen label", ("tag", "foil"): "None and -1: no foil",
           ("tag", "token"): "-1 and None: the last word",
           ("token_attribution", "compare"): "None: no second model (the page: none)",
           ("token_attribution", "method"): "None: the page's default_method (LRP on a large LM where measured best)",
           ("logit_lens", "compare"): "None: no second model (the page: none)",
           ("classify", "compare"): "None: no second model (the page: none)",
           ("tag", "compare"): "None: no second model (the page: none)"}


def test_every_notebook_default_is_the_pages() -> None:
    """The notebook's integrated gradients once defaulted to 32 steps where the page takes up to 256 with a 1 %
    completeness check: every keyword a notebook function shares with its view now has the view's default."""
    import inspect

    from explorer.views import BY_PATH

    differ = []
    for name, path in NB_VIEWS.items():
        params = BY_PATH[path].params
        for key, p in inspect.signature(getattr(nb, name)).parameters.items():
            if key in params and p.default is not inspect.Parameter.empty and (name, key) not in NOT_SET:
                page = params[key].default
                if (tuple(p.default) if isinstance(page, tuple) else p.default) != page:
                    differ.append(f"nb.{name}({key}={p.default!r}): the page's default is {page!r}")
    assert not differ, "\n".join(differ)
    assert inspect.signature(nb.token_attribution).parameters["steps"].default == 256


def test_the_notebook_gives_the_pages_completeness_warning() -> None:
    """Integrated gradients held to 2 steps miss the change by more than 1 %: the notebook's notes say it in the
    page's own words."""
    from explorer.viz.token_attribution import completeness_warning

    res = nb.token_attribution("builtin:tiny-gpt", "the keys to the cabinet are", steps=2)
    said = completeness_warning(res.trace, 1024)
    assert said and said in res.notes
    assert not any("do not add up" in n for n in  # gradient × input has no integral to warn about
                   nb.token_attribution("builtin:tiny-gpt", "the keys to the cabinet are",
                                        method="gradient × input", steps=2).notes)


def test_the_recurrent_cells_default_state_fits_the_cell() -> None:
    """nb.lstm_gates' default was the cell state c, which a GRU does not have: like the page, the default is c where
    the cell has one, else h."""
    gru = nb.lstm_gates("builtin:gru-lm", "the keys to the cabinet are")
    lstm = nb.lstm_gates("builtin:lstm-lm", "the keys to the cabinet are")
    assert "c" not in gru.trace.gates and gru.figures["heatmap"].layout.title.text.startswith("hidden state h")
    assert lstm.figures["heatmap"].layout.title.text.startswith("cell state c")


def test_the_callers_model_is_left_as_it_was() -> None:
    """A Hugging Face model in memory keeps its attention implementation, train mode and requires_grad flags after
    every view (each switches it to eager for the call), and its numbers are unchanged."""
    tok = make_tokenizer()
    model = tiny_model("GPT2LMHeadModel", len(tok), seed=0, n_positions=32, **GPT2_SMALL, n_head=2,
                       attn_implementation="sdpa")
    model.train()
    model.transformer.wte.weight.requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calls = [lambda: nb.self_attention(model, "the dog runs", tokenizer=tok),
             lambda: nb.logit_lens(model, "the dog runs", tokenizer=tok),
             lambda: nb.token_attribution(model, "the dog runs", tokenizer=tok, steps=8),
             lambda: nb.decoding_strategies(model, "the dog", tokenizer=tok, strategies=("greedy",), max_new=3),
             lambda: nb.self_attention(model, "the dog runs", tokenizer=tok, layer=99)]  # raises: still put back
    for call in calls:
        try:
            call()
        except nb.NotebookError:
            pass
        assert model.config._attn_implementation == "sdpa"
        assert model.training and all(m.training for m in model.modules())
        assert not model.transformer.wte.weight.requires_grad
        assert all(p.requires_grad for n, p in model.named_parameters() if n != "transformer.wte.weight")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_last_step_of_training_is_the_trained_checkpoint() -> None:
    """`builtin:lstm-lm@<last step>` is the trained checkpoint in full precision, as the app's training-step control
    reads it (its snapshots are float16); an earlier step is its snapshot."""
    from explorer.loading.catalogue import as_trained, series_steps

    steps = series_steps("builtin:lstm-lm")
    assert len(steps) > 2 and as_trained(f"builtin:lstm-lm@{steps[-1]}") == "builtin:lstm-lm"
    assert as_trained(f"builtin:lstm-lm@{steps[0]}") == f"builtin:lstm-lm@{steps[0]}"
    last, trained = nb.read(f"builtin:lstm-lm@{steps[-1]}"), nb.read("builtin:lstm-lm")
    assert last is trained
    r = nb.lstm_gates(f"builtin:lstm-lm@{steps[-1]}", "the dog runs")
    np.testing.assert_array_equal(r.trace.gates["h"], nb.lstm_gates("builtin:lstm-lm", "the dog runs").trace.gates["h"])
    early = nb.read(f"builtin:lstm-lm@{steps[0]}")
    assert early.id == f"builtin:lstm-lm@{steps[0]}"
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in
               zip(early.model.state_dict().values(), trained.model.state_dict().values()))
    assert diff > 1e-2  # an early snapshot is another model
