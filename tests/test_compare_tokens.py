"""Compare with…: a model known to cut sentences into other tokens says so in the picker, before it is picked
(explorer.loading.catalogue.vocabulary_key, explorer.ui.compare.options), and the key is true: models that share it
tokenise every sentence alike, models that do not, do not."""
from __future__ import annotations

import functools
from collections import defaultdict

import pytest

from explorer.loading.catalogue import catalogue, vocabulary_key
from explorer.loading.loaders import load_model
from explorer.ui import compare

SENTENCES = ("The keys to the old cabinet are on the table.", "She cooked a recipe from her grandmother's paycheck.",
             "unbelievably,   naïve café-goers 123 😊")


@functools.lru_cache(maxsize=None)
def _ids(model_id: str) -> tuple[tuple[int, ...], ...]:
    adapter = load_model(model_id).adapter
    return tuple(adapter.encode(s).ids for s in SENTENCES)


def _keyed() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for entry in catalogue():
        key = vocabulary_key(entry.id)
        if key is not None and entry.family not in ("word2vec", "seq2seq"):
            groups[key].append(entry.id)
    return groups


def test_models_that_share_a_vocabulary_key_read_every_sentence_as_the_same_tokens() -> None:
    groups = _keyed()
    shared = {k: ids for k, ids in groups.items() if len(ids) > 1}
    assert any(len(ids) >= 4 for ids in shared.values())  # the real-English built-ins, MiniLM and its fine-tunes
    for ids in shared.values():
        for other in ids[1:]:
            assert _ids(other) == _ids(ids[0]), (ids[0], other)


def test_models_with_other_keys_read_some_sentence_as_other_tokens() -> None:
    groups = _keyed()
    firsts = [ids[0] for ids in groups.values()]
    assert "pretrained:smollm2" in firsts
    for i, a in enumerate(firsts):
        for b in firsts[i + 1:]:
            assert _ids(a) != _ids(b), (a, b)


def test_a_step_of_training_reads_as_its_model_and_unknown_models_have_no_key() -> None:
    assert vocabulary_key("builtin:lstm-lm@640") == vocabulary_key("builtin:lstm-lm")
    assert vocabulary_key("hf:prajjwal1/bert-tiny") is None and vocabulary_key("not an id") is None


@pytest.fixture()
def offline_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "session_catalogue", catalogue)


def test_the_lens_on_smollm2_says_before_the_pick_that_no_model_here_can_be_subtracted(offline_catalogue) -> None:
    from explorer.views import BY_PATH

    labels = compare.options(BY_PATH["logit-lens"].needs, "pretrained:smollm2", same_tokens=True)
    offered = {k: v for k, v in labels.items() if k != compare.NONE}
    assert offered and all(v.endswith(compare.OTHER_TOKENS) for v in offered.values()), offered
    plain = compare.options(BY_PATH["logit-lens"].needs, "pretrained:smollm2")
    assert not any(v.endswith(compare.OTHER_TOKENS) for v in plain.values())  # a view that does not subtract


def test_models_that_can_be_subtracted_are_offered_plainly(offline_catalogue) -> None:
    from explorer.views import BY_PATH

    labels = compare.options(BY_PATH["logit-lens"].needs, "builtin:lstm-lm-wordnet", same_tokens=True)
    assert labels["builtin:gru-lm-wordnet"] == "gru-lm-wordnet (built-in)"
    # the real-English transformers keep WordNet's 12,000 words, the recurrent models read 20,000 everyday ones
    assert labels["builtin:tiny-gpt-wordnet"].endswith(compare.OTHER_TOKENS)
    assert labels["pretrained:smollm2"].endswith(compare.OTHER_TOKENS)
    assert labels["builtin:lstm-lm"].endswith(compare.OTHER_TOKENS)  # the generated corpus's vocabulary
