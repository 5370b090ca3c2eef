"""What a model can do (explorer.adapters.capabilities): attached when it is loaded, typed, None when missing; the
views' needs; what the pickers offer before a model is loaded (MAY_HAVE) against what each model has once loaded."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from explorer.adapters import capabilities as C
from explorer.data.vocab import Vocab
from explorer.adapters.protocols import Capabilities, can_intervene, is_recurrent
from explorer.loading.catalogue import FAMILIES, catalogue
from explorer.loading.loaders import LoadedModel, load_model
from explorer.loading import pretrained
from explorer.views import VIEWS
from families import FAMILIES as HF_FAMILIES, tiny

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = [e.id for e in catalogue() if not e.id.startswith("pretrained:") or
           pretrained.is_installed(e.id.split(":", 1)[1])]


@pytest.fixture(scope="module")
def shipped() -> dict[str, LoadedModel]:
    return {mid: load_model(mid) for mid in SHIPPED}


def test_the_table_the_dataclass_and_may_have_name_the_same_capabilities() -> None:
    assert C.NAMES == tuple(f.name for f in dataclasses.fields(Capabilities))
    assert set(C.MAY_HAVE) == set(FAMILIES)
    assert all(caps <= set(C.NAMES) for caps in C.MAY_HAVE.values())
    for view in VIEWS:  # every view with a model but the Models page (any model) says what it needs
        if "model" in view.params and view.url_path != "catalogue":
            assert view.needs is not None and set(view.needs) <= set(C.NAMES), view.url_path


def test_every_shipped_model_has_exactly_what_its_family_may_have(shipped: dict[str, LoadedModel]) -> None:
    """What the pickers offer before loading is what each model has once loaded: no view offers a shipped model it
    cannot read, and none leaves out one it can. A packaged model may say it has less than its family (MiniLM without
    a task head does not decide: explorer.loading.pretrained.Packaged.caps)."""
    assert len(shipped) >= 17
    declared = {p.id: p.caps for p in pretrained.PACKAGED.values() if p.caps is not None}
    assert set(declared) == {"pretrained:minilm", "pretrained:minilm-mlm"}
    assert all(caps < C.MAY_HAVE[pretrained.PACKAGED[mid[11:]].family] for mid, caps in declared.items())
    for mid, loaded in shipped.items():
        assert loaded.caps.names == declared.get(mid, C.MAY_HAVE[loaded.family]), mid
        for name in C.NAMES:  # a capability is the adapter itself typed as its protocol, or one of its parts
            cap = getattr(loaded.caps, name)
            assert cap is None or getattr(cap, "core", cap) is loaded.adapter, (mid, name)


def test_capabilities_follow_the_adapters_own_flags(shipped: dict[str, LoadedModel]) -> None:
    for mid, loaded in shipped.items():
        a, caps = loaded.adapter, loaded.caps
        assert (caps.stepper is not None) == a.can_generate, mid
        assert (caps.attention is not None) == bool(a.streams), mid
        assert (caps.alignment is not None) == a.is_encoder_decoder, mid
        assert (caps.recurrence is not None) == is_recurrent(a), mid
        assert (caps.patching is not None) == can_intervene(caps.patching or a), mid
        assert caps.lens is None or (caps.lens.lens_names and a.can_generate and not a.is_encoder_decoder), mid


@pytest.mark.parametrize("name", sorted(HF_FAMILIES))
def test_hugging_face_families_have_at_most_what_their_family_may_have(name: str) -> None:
    model, tok, family = tiny(name)
    loaded = LoadedModel(f"local:tiny-{name}", family, model, "cpu", "float32", {}, tokenizer=tok)
    assert loaded.caps.names <= C.MAY_HAVE[family]
    assert "attention" in loaded.caps.names and "tables" in loaded.caps.names
    with_head = any(s in type(model).__name__ for s in ("ForCausalLM", "LMHead", "ConditionalGeneration", "MTModel"))
    assert ("stepper" in loaded.caps.names) == with_head, name
    expected = {"decoder": {"lens", "patching", "positions"}, "encoder": {"fill_in", "positions"},
                "encoder-decoder": {"alignment", "gradient"}}[family]
    assert expected <= loaded.caps.names, name


@pytest.mark.parametrize("cls, task", [("BertForSequenceClassification", "sequence-classification"),
                                       ("BertForTokenClassification", "token-classification")])
def test_an_encoder_with_a_task_head_decides(cls: str, task: str) -> None:
    """An encoder fine-tuned as a classifier or tagger (a Hugging Face *ForSequenceClassification, MiniLM fine-tuned on
    the Models page) decides: the encoder family may have "decision"."""
    from families import SMALL, make_tokenizer, tiny_model

    tok = make_tokenizer()
    model = tiny_model(cls, len(tok), seed=0, attn_implementation="eager", **SMALL, max_position_embeddings=64,
                       pad_token_id=0, num_labels=3).eval()
    loaded = LoadedModel("local:tiny-bert-task", "encoder", model, "cpu", "float32", {"task": task}, tokenizer=tok)
    assert loaded.caps.names == C.MAY_HAVE["encoder"]
    # so a run of the Models page's "Fine-tune MiniLM" (an upload of that family) opens in the Decision view before
    # anything has loaded it (explorer.ui.widgets.refused: it was refused while "encoder" lacked "decision")
    from explorer.loading.catalogue import CatalogueEntry
    from explorer.models.build import FAMILY_OF_ARCHITECTURE, FINE_TUNE
    from explorer.views import BY_PATH

    run = CatalogueEntry("upload:run", "my-minilm-finetune (uploaded)", FAMILY_OF_ARCHITECTURE[FINE_TUNE], "")
    assert run.may_have(BY_PATH["decision"].needs)


def test_a_state_dict_has_what_was_found_in_it() -> None:
    lstm = torch.nn.LSTM(8, 16, batch_first=True)
    state = {"embedding.weight": torch.randn(20, 8), **{f"rnn.{k}": v for k, v in lstm.state_dict().items()},
             "decoder.weight": torch.randn(20, 16), "decoder.bias": torch.zeros(20)}
    vocabs = {"vocab": Vocab([f"w{i}" for i in range(20)], keep_ids=True)}
    loaded = LoadedModel("upload:lstm", "state-dict", None, "cpu", "float32", vocabs=vocabs, state_dict=state)
    # a state dict may hold a language model or a classifier (a task head): this one is a language model
    assert loaded.caps.names == C.MAY_HAVE["state-dict"] - {"decision"}
    classifier = LoadedModel("upload:cls", "state-dict", None, "cpu", "float32", vocabs=vocabs, state_dict={
        **{k: v for k, v in state.items() if not k.startswith("decoder.")}, "fc.weight": torch.randn(3, 16)})
    assert classifier.caps.names == {"recurrence", "tables", "decision", "patching"}  # patched toward its labels
    assert classifier.caps.decision is not None and classifier.caps.decision.head.labels == ("label 0", "label 1",
                                                                                             "label 2")
    no_head = LoadedModel("upload:encoder", "state-dict", None, "cpu", "float32", vocabs=vocabs,
                          state_dict={k: v for k, v in state.items() if not k.startswith("decoder.")})
    assert {"recurrence", "tables"} <= no_head.caps.names and not {"stepper", "lens", "gradient"} & no_head.caps.names
    nothing = LoadedModel("upload:x", "state-dict", None, "cpu", "float32", state_dict={})
    assert nothing.caps.names <= {"tables"}


def test_a_view_offers_the_models_that_may_have_what_it_needs(shipped: dict[str, LoadedModel]) -> None:
    for view in VIEWS:
        if view.needs is None:
            continue
        entries = {e.id: dataclasses.replace(e, caps=pretrained.PACKAGED[e.id[11:]].caps if e.id.startswith(
            "pretrained:") else None) for e in catalogue()}  # before any model was loaded
        offered = {mid for mid in shipped if entries[mid].may_have(view.needs)}
        able = {mid for mid, loaded in shipped.items() if set(view.needs) <= loaded.caps.names}
        assert offered == able, view.url_path
    assert C.may_have("", ("lens",))  # a family known only once loaded: offered, the view says what is missing
    assert C.families_with(("alignment",)) == ["encoder-decoder", "seq2seq-rnn"]


def test_a_missing_capability_is_the_views_message(shipped: dict[str, LoadedModel]) -> None:
    from explorer.probes.decoding_strategies import DecodingError, generator
    from explorer.probes.logit_lens import LensError, logit_lens
    from explorer.probes.self_attention import AttentionError, attention_trace
    from explorer.probes.token_attribution import AttributionError, attribution

    w2v = shipped["builtin:word2vec"]
    assert w2v.caps.names == {"tables"}
    with pytest.raises(LensError, match="no layers and next-token prediction"):
        logit_lens(w2v, "the dog")
    with pytest.raises(AttentionError, match="not a transformer"):
        attention_trace(w2v, "the dog")
    with pytest.raises(AttributionError, match="head"):
        attribution(w2v, "the dog")
    with pytest.raises(DecodingError, match="next token"):
        generator(w2v)
    masked = shipped["builtin:masked-lm"]  # reads both ways: its layers predict the word at each position
    with pytest.raises(LensError, match="predicts the next token .it reads the sentence both ways"):
        logit_lens(masked, "the dog")


def test_architecture_lists_every_capability() -> None:
    """docs/ARCHITECTURE.md's capability table names each capability, its protocol and the views that need it."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `(\w+)` \|", text, flags=re.M))
    assert rows == {c.name: c.protocol for c in C.CAPABILITIES}
    for c in C.CAPABILITIES:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{c.name}` |"))
        needing = sorted(v.title for v in VIEWS if v.needs and c.name in v.needs)
        assert sorted(re.findall(r"\*([^*]+)\*", row.split("|")[4])) == needing, c.name
