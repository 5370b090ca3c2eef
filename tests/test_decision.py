"""Task models (classifiers and taggers) read and shown as they decide: every number against the model's own forward.

Hugging Face *ForSequenceClassification / *ForTokenClassification of every family the explorer reads that has such a
class (opened from a folder as a user's model is, its task read from config.architectures, its labels from
config.id2label); a student's PyTorch classifier or tagger (a last-state LSTM, a mean-pooled GRU, a bidirectional
LSTM tagger) from an upload with a JSON beside it, and in the notebook, where its own forward is the reference; the
decision after each word against the model run on each prefix; attribution against Captum and autograd, and the
contrastive question against two independent runs subtracted."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save

from explorer import nb
from explorer.files.safe_load import read_weights
from explorer.loading import loaders
from explorer.loading.loaders import LoadedModel, materialise
from explorer.loading.uploads import bundle_from_parts
from explorer.probes import decision as P
from tests.families import FAMILIES, make_tokenizer, tiny_model

LABELS = {0: "negative", 1: "neutral", 2: "positive"}
TEXT = "the old car is fast ."
ENCODERS = ("bert", "distilbert", "roberta", "albert", "electra")
DECODERS = ("gpt2", "llama", "qwen2", "mistral", "gemma", "phi3", "gpt_neox", "opt", "bloom", "falcon")


def _head_class(name: str, kind: str) -> str | None:
    import transformers

    base = FAMILIES[name][1]
    stem = base.replace("ForCausalLM", "").replace("LMHeadModel", "").replace("Model", "")
    cls = f"{stem}For{kind}"
    return cls if hasattr(transformers, cls) else None


def _folder(tmp_path: Path, name: str, kind: str) -> tuple[str, torch.nn.Module, object]:
    """A tiny random `kind` ("SequenceClassification" | "TokenClassification") of family `name`, saved with its
    tokenizer and labels under tmp_path and opened as local:<folder>."""
    cls = _head_class(name, kind)
    if cls is None:
        pytest.skip(f"transformers has no {name} *For{kind}")
    tok = make_tokenizer()
    kwargs = dict(FAMILIES[name][2], num_labels=3, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    model = tiny_model(cls, len(tok), seed=0, attn_implementation="eager", **kwargs).eval()
    folder = tmp_path / f"{name}-{kind.lower()}"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return f"local:{folder.name}", model, tok


@pytest.fixture
def model_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", ENCODERS + DECODERS)
def test_a_hugging_face_sentence_classifier_decides_as_its_forward(model_path: Path, name: str) -> None:
    mid, model, _ = _folder(model_path, name, "SequenceClassification")
    loaded = loaders.load_model(mid)
    tok = loaded.tokenizer  # the model's own, as saved and read back
    assert loaded.meta["task"] == "sequence-classification" and loaded.caps.decision is not None
    trace = P.decide(loaded, TEXT)
    assert trace.labels == ("negative", "neutral", "positive") and not trace.per_token
    enc = tok(TEXT, return_tensors="pt")
    with torch.no_grad():
        theirs = model(**enc).logits[0].double()
    np.testing.assert_allclose(trace.logits, theirs.numpy(), atol=1e-5)
    np.testing.assert_allclose(trace.probs, torch.softmax(theirs, -1).numpy(), atol=1e-6)
    assert trace.probs.sum() == pytest.approx(1.0)
    # the decision after each word: the model run on the words so far and the </s> every input ends with
    words = [w for w, special in zip(trace.tokens, trace.special) if not special]
    assert trace.prefix_probs is not None and trace.prefix_probs.shape == (len(trace.tokens), 3)
    for t in range(len(words)):
        with torch.no_grad():
            p = torch.softmax(model(**tok(" ".join(words[:t + 1]), return_tensors="pt")).logits[0].double(), -1)
        np.testing.assert_allclose(trace.prefix_probs[t], p.numpy(), atol=1e-5)
    assert trace.special[-1] and np.isnan(trace.prefix_probs[-1]).all()  # </s>: a special token ends no prefix
    assert ("task", "a sentence classifier with 3 labels (negative, neutral, positive)") in loaded.adapter.describe() \
        or name in DECODERS


@pytest.mark.parametrize("name", ENCODERS + ("gpt2", "llama", "bloom", "falcon"))
def test_a_hugging_face_tagger_labels_each_token_as_its_forward(model_path: Path, name: str) -> None:
    mid, model, _ = _folder(model_path, name, "TokenClassification")
    loaded = loaders.load_model(mid)
    tok = loaded.tokenizer
    assert loaded.meta["task"] == "token-classification"
    trace = P.decide(loaded, TEXT)
    assert trace.per_token and trace.prefix_probs is None
    with torch.no_grad():
        theirs = model(**tok(TEXT, return_tensors="pt")).logits[0].double()
    assert trace.probs.shape == (len(trace.tokens), 3)
    np.testing.assert_allclose(trace.logits, theirs.numpy(), atol=1e-5)
    np.testing.assert_array_equal(trace.chosen, theirs.argmax(-1).numpy())


def test_a_sentence_pair_classifier_reads_two_segments(model_path: Path) -> None:
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the film was good i liked it not".split()]
    (model_path / "vocab.txt").write_text("\n".join(vocab))
    tok = transformers.BertTokenizerFast(str(model_path / "vocab.txt"))
    model = tiny_model("BertForSequenceClassification", len(vocab), seed=1, attn_implementation="eager",
                       hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                       num_labels=2, id2label={0: "contradiction", 1: "entailment"}).eval()
    model.save_pretrained(model_path / "nli")
    tok.save_pretrained(model_path / "nli")
    loaded = loaders.load_model("local:nli")
    assert loaded.caps.decision is not None and loaded.caps.decision.head.pairs
    trace = P.decide(loaded, "the film was good", "i liked it")
    assert trace.segments == (0,) * 6 + (1,) * 4 and trace.prefix_probs is None
    with torch.no_grad():
        theirs = model(**tok("the film was good", "i liked it", return_tensors="pt")).logits[0]
    np.testing.assert_allclose(trace.probs, torch.softmax(theirs.double(), -1).numpy(), atol=1e-6)
    one = P.decide(loaded, "the film was good")
    assert not np.allclose(one.probs, trace.probs)  # the second segment is read


# ------------------------------------------------------------------------------------- a student's modules
WORDS = ["<pad>", "<unk>", *"the film was not good great bad i liked it very a plot".split()]


class LastState(torch.nn.Module):
    """The lab model: embedding -> LSTM -> Linear on h_n."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(len(WORDS), 8)
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True, num_layers=2)
        self.fc = torch.nn.Linear(16, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(self.embedding(ids))
        return self.fc(h[-1])


class MeanPooled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(len(WORDS), 8)
        self.rnn = torch.nn.GRU(8, 12, batch_first=True, bidirectional=True)
        self.classifier = torch.nn.Linear(24, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.emb(ids))
        return self.classifier(out.mean(1))


class Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(len(WORDS), 8)
        self.lstm = torch.nn.LSTM(8, 10, batch_first=True, bidirectional=True)
        self.out = torch.nn.Linear(20, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(ids))
        return self.out(out)


def _ids(text: str) -> torch.Tensor:
    return torch.tensor([[WORDS.index(w) for w in text.split()]])


def _upload(module: torch.nn.Module, settings: dict | None) -> LoadedModel:
    state = {k: v.contiguous() for k, v in module.state_dict().items()}
    files = {"vocab.json": json.dumps(WORDS).encode()}
    if settings is not None:
        files["task.json"] = json.dumps(settings).encode()
    return materialise(bundle_from_parts("upload:lab", "lab", read_weights(save(state), "model.safetensors"), files),
                        "cpu", "float32")


@pytest.mark.parametrize("module, settings, per_token", [
    (LastState, None, False),
    (MeanPooled, {"pooling": "mean", "labels": ["neg", "neu", "pos"]}, False),
    (Tagger, {"task": "tag", "labels": ["noun", "verb", "adjective", "adverb"]}, True),
])
def test_an_uploaded_classifier_or_tagger_decides_as_its_forward(module, settings, per_token) -> None:
    torch.manual_seed(0)
    m = module().eval()
    loaded = _upload(m, settings)
    assert loaded.caps.names == {"recurrence", "tables", "decision", "patching"}
    text = "the film was not good"
    trace = P.decide(loaded, text)
    with torch.no_grad():
        theirs = m(_ids(text))[0].double()
    np.testing.assert_allclose(trace.logits, theirs.numpy(), atol=1e-5)
    assert trace.per_token == per_token
    rows = dict(loaded.adapter.describe())
    assert rows["task settings read from" if settings else "task head"]
    if settings is None:  # what the weights cannot tell is said, with what was assumed
        assumed = [v for k, v in loaded.adapter.describe() if k == "assumed"]
        assert any("Pooling" in a and "'last'" in a for a in assumed) and any(a.startswith("Labels:") for a in assumed)
        assert trace.labels == ("label 0", "label 1")
    else:
        assert list(trace.labels) == settings["labels"]
    if not per_token:  # each prefix: the module run on it
        words = text.split()
        for t in range(len(words)):
            with torch.no_grad():
                p = torch.softmax(m(_ids(" ".join(words[:t + 1])))[0].double(), -1)
            np.testing.assert_allclose(trace.prefix_probs[t], p.numpy(), atol=1e-5)


def test_a_settings_json_with_a_wrong_value_is_named() -> None:
    from explorer.files.safe_load import CorruptFileError

    with pytest.raises(CorruptFileError, match="pooling"):
        _upload(LastState(), {"pooling": "median"})


@pytest.mark.parametrize("module, pooling", [(LastState, None), (MeanPooled, "mean"), (Tagger, None)])
def test_the_notebook_reads_a_students_module_by_its_own_forward(module, pooling) -> None:
    torch.manual_seed(1)
    m = module().eval()
    fn = nb.tag if module is Tagger else nb.classify
    r = fn(m, "the film was not good", vocab=WORDS)
    with torch.no_grad():
        theirs = torch.softmax(m(_ids("the film was not good"))[0].double(), -1).numpy()
    np.testing.assert_allclose(r.trace.probs, theirs, atol=1e-5)
    said = " ".join(r.notes)
    assert "equal its own forward" in said
    if pooling:
        assert f"'{pooling}'" in said
    assert set(r.figures) == ({"tags", "attribution"} if module is Tagger else {"labels", "prefixes", "attribution"})
    assert r.tables["attribution"][0]["token"] == "the"


def test_the_notebook_takes_label_names_and_a_second_sentence() -> None:
    torch.manual_seed(2)
    r = nb.classify(LastState().eval(), "the film was good", second="the film was not good", vocab=WORDS,
                    labels=["negative", "positive"], label="negative", foil="positive")
    assert r.trace.labels == ("negative", "positive")
    bars = r.figures["labels"].data
    assert [b.name for b in bars] == ["A: the film was good", "B: the film was not good"]  # the page's legend
    assert all(len(b.x) == 2 for b in bars)
    with pytest.raises(nb.NotebookError, match="no label 'great'"):
        nb.classify(LastState().eval(), "the film", vocab=WORDS, label="great")


# ------------------------------------------------------------------------------------------------ attribution
def test_attribution_of_a_label_against_autograd_and_captum() -> None:
    from captum.attr import IntegratedGradients

    torch.manual_seed(3)
    m = LastState().eval()
    loaded = _upload(m, {"labels": ["negative", "positive"]})
    text = "the film was not good"
    attr = P.attribute(loaded, text, 1, steps=512)
    E = m.embedding(_ids(text)).detach()

    def f(x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = m.lstm(x)
        return torch.log_softmax(m.fc(h[-1]), -1)[:, 1]

    x = E.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x).sum(), x)
    np.testing.assert_allclose(attr.gradient_x_input, (g * E).sum(-1)[0].double().numpy(), atol=1e-6)
    theirs = IntegratedGradients(f).attribute(E, baselines=torch.zeros_like(E), n_steps=400,
                                              method="gausslegendre").sum(-1)[0].double().numpy()
    np.testing.assert_allclose(attr.integrated, theirs, atol=2e-3 * max(1.0, np.abs(theirs).max()))
    with torch.no_grad():
        assert attr.value == pytest.approx(float(f(E)), abs=1e-5)
        assert attr.baseline_value == pytest.approx(float(f(torch.zeros_like(E))), abs=1e-5)
    # completeness is reported as it is: the sum's distance from f(E) − f(B)
    assert attr.completeness == pytest.approx(abs(attr.integrated.sum() - (attr.value - attr.baseline_value)),
                                              abs=1e-9)
    assert attr.relative <= 0.01


def test_a_contrastive_attribution_is_two_runs_subtracted() -> None:
    torch.manual_seed(4)
    loaded = _upload(MeanPooled().eval(), {"pooling": "mean", "labels": ["neg", "neu", "pos"]})
    text = "i liked the plot"
    both = P.attribute(loaded, text, 2, foil=0, steps=512)
    pos, neg = P.attribute(loaded, text, 2, steps=512), P.attribute(loaded, text, 0, steps=512)
    assert both.of == "log p(pos) − log p(neg)"
    assert both.value == pytest.approx(pos.value - neg.value, abs=1e-6)
    assert both.baseline_value == pytest.approx(pos.baseline_value - neg.baseline_value, abs=1e-6)
    np.testing.assert_allclose(both.gradient_x_input, pos.gradient_x_input - neg.gradient_x_input, atol=1e-6)
    scale = max(1e-3, float(np.abs(both.integrated).max()))
    np.testing.assert_allclose(both.integrated, pos.integrated - neg.integrated, atol=0.03 * scale)


def test_a_taggers_word_is_attributed_to_its_context() -> None:
    torch.manual_seed(5)
    loaded = _upload(Tagger().eval(), {"task": "tag"})
    attr = P.attribute(loaded, "the film was not good", 1, token=1)
    assert attr.token == 1 and attr.gradient_x_input.shape == (5,)
    assert np.abs(attr.gradient_x_input[2:]).sum() > 0  # a bidirectional tagger reads the words after it too


# ------------------------------------------------------------------------------------------ other views say so
def test_language_model_views_say_what_a_task_model_is(model_path: Path) -> None:
    from explorer.probes.logit_lens import LensError, logit_lens
    from explorer.probes.masked_words import cannot_fill
    from explorer.probes.token_attribution import AttributionError, attribution

    mid, _, _ = _folder(model_path, "bert", "SequenceClassification")
    said = "is a sentence classifier with 3 labels (negative, neutral, positive)"
    as_mlm = loaders.load_model(mid, task="masked-lm")  # as the masked-word view loads it: without its head
    assert said in cannot_fill(as_mlm) and "fills in no [MASK]" in cannot_fill(as_mlm)
    loaded = loaders.load_model(mid)
    with pytest.raises(AttributionError, match="sentence classifier with 3 labels"):
        attribution(loaded, TEXT)
    with pytest.raises(LensError, match="predicts no next word"):
        logit_lens(loaded, TEXT)
    with pytest.raises(P.DecisionError, match="is a language model: it has no task head"):
        P.decide(loaders.load_model("builtin:rnn-lm"), "the keys to the cabinet")


# ------------------------------------------------------------------------------ the other views that apply
def test_self_attention_reads_a_classifier_and_its_cls_row(model_path: Path) -> None:
    from explorer.probes.self_attention import attention_trace

    mid, model, _ = _folder(model_path, "bert", "SequenceClassification")
    loaded = loaders.load_model(mid)
    trace = attention_trace(loaded, TEXT)
    with torch.no_grad():
        theirs = model(**loaded.tokenizer(TEXT, return_tensors="pt"), output_attentions=True).attentions
    np.testing.assert_allclose(trace.attentions, torch.stack([a[0] for a in theirs]).numpy(), atol=1e-6)


def test_the_recurrent_cell_and_the_embeddings_read_a_recurrent_classifier() -> None:
    from explorer.probes.lstm_gates import rnn_gates
    from explorer.probes.word_embeddings import embedding_table

    torch.manual_seed(6)
    m = MeanPooled().eval()
    loaded = _upload(m, {"pooling": "mean"})
    trace = rnn_gates(loaded, "the film was not good")
    with torch.no_grad():
        out, _ = m.rnn(m.emb(_ids("the film was not good")))
    np.testing.assert_allclose(trace.gates["h"][0, 0], out[0, :, :12].numpy(), atol=1e-5)  # forward direction
    np.testing.assert_allclose(trace.gates["h"][0, 1], out[0, :, 12:].numpy(), atol=1e-5)  # backward direction
    assert "predicts no next word" in P.not_a_language_model(loaded, "predicts no next word")
    table = embedding_table(loaded)
    np.testing.assert_allclose(table.vectors, m.emb.weight.detach().numpy(), atol=1e-7)


def test_decoding_says_what_a_recurrent_classifier_is() -> None:
    from explorer.probes.decoding_strategies import generator

    loaded = _upload(LastState().eval(), {"labels": ["negative", "positive"]})
    said = "upload:lab is a sentence classifier with 2 labels (negative, positive)"
    with pytest.raises(Exception, match=r"sentence classifier with 2 labels \(negative, positive\): it generates"):
        generator(loaded)
    assert said in P.not_a_language_model(loaded, "x")


def test_the_models_page_asks_what_the_weights_cannot_tell_and_applies_it() -> None:
    """An uploaded mean-pooled classifier without a JSON is read as last-state pooling with made-up label names, and
    says so; the Models page asks for the task, pooling and names, and the upload read with them decides as the
    module's own forward."""
    from conftest import assert_no_exception, run_page
    from explorer.loading.uploads import register_upload

    torch.manual_seed(0)
    m = MeanPooled().eval()
    state = {k: v.contiguous() for k, v in m.state_dict().items()}
    uid = register_upload([("lab.safetensors", save(state)), ("vocab.json", json.dumps(WORDS).encode())])
    at = run_page("app_pages/catalogue.py", {"model": uid})
    assert_no_exception(at)
    assert any("Assumed:" in c.value and "last" in c.value for c in at.caption)
    at.text_input(key="ask_labels").input("neg, neu").run()
    assert at.warning and "Give 3 non-empty names" in at.warning[0].value
    at.text_input(key="ask_labels").input("neg, neu, pos").run()
    at.selectbox(key="ask_pooling").set_value("mean").run()
    at.button(key="ask_apply").click().run()
    assert_no_exception(at)
    new = at.session_state["model"]
    assert new.startswith("upload:") and new != uid
    loaded = loaders.load_model(new)
    head = loaded.caps.decision.head
    assert (head.labels, head.pooling, head.assumed) == (("neg", "neu", "pos"), "mean", ())
    assert ("task settings", "set on the Models page") in loaded.adapter.describe()
    trace = P.decide(loaded, "the film was not good")
    with torch.no_grad():
        theirs = m(_ids("the film was not good"))[0].double()
    np.testing.assert_allclose(trace.logits, theirs.numpy(), atol=1e-5)
