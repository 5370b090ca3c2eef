"""The example sentences of a model: what each view offers as its default sentence and its preset menu.

The sentences themselves, by language and purpose (standard library only). A view declares a purpose
(explorer.views: `View.sentences`), and the loaded model answers with sentences for it (`adapter.examples(purpose)`,
which calls explorer.adapters.examples.for_model, where a model reads them):

- built-in models (and checkpoints trained here) get sentences of the language they were trained on
  (`meta["corpus"]["generator"]`): explorer.data.english (generated) or WORDNET (real English, natural sentences)
  for the language models, explorer.data.translation and explorer.data.dates for the encoder-decoders;
- MiniLM and Hugging Face models get natural English (NATURAL);
- a model that reads left to right (a causal transformer, a one-way recurrent LM: `left_to_right`) gets the sentences
  of LEFT_TO_RIGHT where a purpose has them: a claim that needs a later word is reworded so that the word comes first;
- every candidate is read with the model's own `encode`, and only sentences without an unknown token are offered;
  a model whose vocabulary is unknown here (a user's checkpoint) gets the candidates of every language that it
  reads in full, or, when none, the sentences with the fewest unknown words and a note saying so.
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.data import dates, english, translation

PURPOSES = {
    "agreement": "subject-verb agreement across an attractor (language models)",
    "attention": "a sentence whose words refer back to earlier words",
    "chat": "a message to an instruction-tuned model (a user turn of its chat template)",
    "contrast": "a prompt with a corrupted twin of as many tokens and two continuations (CONTRASTS)",
    "decide": "a sentence whose label a classifier or tagger decides (sentiment, a word's part of speech)",
    "distance": "a long dependency that ends in the word to predict",
    "masked": "a sentence with [MASK] where a word should be",
    "order": "a sentence whose meaning depends on word order",
    "prompt": "an unfinished sentence to continue (no final '.')",
    "translation": "a source sentence whose translation changes word order",
    "words": "words to find in an embedding table",
}


def _classes(*names: str, n: int = 8) -> str:
    """Words of explorer.data.english's word classes, as one line of words."""
    return " ".join(w for name in names for w in english.WORD_CLASSES[name][:n])


# The built-in language models' generated English (explorer.data.english). tests/test_examples.py checks every
# word against the checkpoints' vocabularies.
ENGLISH: dict[str, tuple[str, ...]] = {
    "agreement": (
        "the keys to the old cabinet are on the table .",
        "the dog that the farmers feed sleeps in the garden .",
        "the woman who the doctors visited yesterday was very tired .",
        "the pictures of the famous painter in the museum are expensive .",
        'the teacher said : " the children ( who live near the river ) are happy " .',
        "the computer which i had just put into the machine room on the fifth floor crashed .",
    ),
    "prompt": (  # the first continues differently under greedy, top-k and top-p (tests/test_examples.py)
        "the dog that the farmers feed",
        'the teacher said : " the children',
        "the keys to the old cabinet",
    ),
    "distance": (
        "the keys to the cabinets in the old kitchen near the big windows of the house are",
        "the student near the old tables is",
        "the dogs that the old man in the red house likes are",
    ),
    "masked": (
        "the keys to the cabinet [MASK] on the table .",
        "the dog that the farmers feed [MASK] in the garden .",
        "the woman who the doctors visited yesterday [MASK] very tired .",
        "the children who live near the river [MASK] happy .",
        "the [MASK] ate the cake .",
        "she put the cup on the [MASK] .",
        "the teacher [MASK] the old car .",
    ),
    "order": (
        "the dog chased the cat .",
        "the cat chased the dog .",
        "the keys to the old cabinet are on the table .",
    ),
    "words": (
        "the small dog and the big cat saw a king and a queen",
        _classes("animals"),
        _classes("colours"),
        _classes("professions"),
        "dog dogs cat cats horse horses mouse mice",
        _classes("numbers", "ordinals", n=5),
    ),
}
ENGLISH["attention"] = ENGLISH["agreement"]

# The built-in translation models' English side (explorer.data.translation): the first translates with the
# adjectives after their noun ("european economic area" -> "zone économique européenne").
TRANSLATION: dict[str, tuple[str, ...]] = {"translation": tuple(translation.PRESETS)}
DATES: dict[str, tuple[str, ...]] = {"translation": tuple(dates.PRESETS)}

# The self-attention view's pronoun pair (Vaswani et al.'s example): "it" refers to the animal in the first sentence
# and to the street in the second (PRONOUN: the pronoun and its two referents). A model that reads left to right
# computes "it" from the words before it only: in the original pair (False) the word that decides comes after "it",
# and a causal model's "it" is the same in both sentences; its pair (True) puts that word before "it".
PRONOUN = ("it", "animal", "street")
PRONOUN_PAIRS: dict[bool, tuple[str, str]] = {
    False: ("The animal didn't cross the street because it was too tired.",
            "The animal didn't cross the street because it was too wide."),
    True: ("The animal didn't cross the street because, too tired, it gave up.",
           "The animal didn't cross the street because, too wide, it was a risk."),
}
COLOURS = "red green blue yellow black white"  # words of one class in natural English (the word-embeddings view)
ANALOGY = ("king", "man", "woman", "queen")  # the word-embeddings view's default a − b + c and its expected answer

# MiniLM and Hugging Face models. The views that read "agreement" (logit lens, attribution, recurrent cell) look at
# the next token a language model predicts after the last one, so these stop where the prediction means something:
# a fact (" Paris"), or the verb that agrees with its subject across an attractor (tests/test_examples.py checks
# that SmolLM2's prediction at the end of the first is a word).
NATURAL: dict[str, tuple[str, ...]] = {
    "agreement": (
        "The capital of France is",
        "The keys to the cabinet",
        "The dog that the farmers feed",
        "The children who live near the river",
        "The opposite of hot is",
    ),
    "chat": (
        "What is the capital of France?",
        "Write a short poem about the sea.",
        "Explain in one sentence what a language model does.",
        "Give me three names for a black cat.",
    ),
    "attention": (PRONOUN_PAIRS[False][0], "A robot must obey the orders given it.", PRONOUN_PAIRS[False][1]),
    "prompt": (
        "Once upon a time, in a small village,",
        "The keys to the old cabinet",
        "The meaning of life is",
        "time goes by so",
    ),
    "distance": ("The keys to the cabinets in the old kitchen near the big windows of the house are",),
    "masked": (
        "The keys to the cabinet [MASK] on the table.",
        "The capital of France is [MASK].",
        "She put the cup on the [MASK].",
        "The doctor said that [MASK] would be back soon.",
    ),
    "order": (
        "The dog bit the man.",
        "The man bit the dog.",
        "She gave him the book before he gave her the pen.",
        "Order matters: not all that glitters is gold.",
    ),
    "translation": (
        "The agreement on the European Economic Area was signed in August 1992.",
        "The red car is fast.",
        "My French friends bought a new blue car yesterday.",
        "The old wooden table is in the kitchen.",
    ),
    "words": (
        "the small dog and the big cat saw a king and a queen",
        "king queen man woman prince princess boy girl",
        COLOURS,
        "dog dogs cat cats horse horses mouse mice",
        "the doctor and the teacher ate an apple and a banana",
        "one two three four five first second third",
    ),
}
# The interventions view's prompts: clean prompt -> (corrupted prompt of as many tokens, answer, wrong continuation).
# The clean prompt ends where the model chooses between the two (a fact, a verb's number, a name: Wang et al. 2022).
CONTRASTS: dict[str, tuple[str, str, str]] = {
    "the keys to the cabinet": ("the key to the cabinet", "are", "is"),
    "the dog that the farmers feed": ("the dogs that the farmers feed", "sleeps", "sleep"),
    "the pictures of the famous painter": ("the picture of the famous painter", "are", "is"),
    "The Eiffel Tower is in the city of": ("The Colosseum is in the city of", "Paris", "Rome"),
    "When Mary and John went to the store, John gave a drink to": (
        "When Mary and John went to the store, Mary gave a drink to", "Mary", "John"),
    "The keys to the cabinet": ("The key to the cabinet", "are", "is"),
}
# The decision view's sentences: a classifier's negation turns a decision; a tagger's word changes label in context.
DECIDE = ("The film was good but the ending was not.", "The food was not bad at all.", "I did not enjoy the trip.",
          "What a lovely day at the beach!", "They went for a long run.", "They run to school every morning.")
ENGLISH["contrast"] = tuple(k for k in CONTRASTS if k.islower())
NATURAL["contrast"] = tuple(k for k in CONTRASTS if not k.islower())
# The real-English built-in models (explorer.data.wordnet_english, trained on WordNet's example sentences and
# definitions; the recurrent ones also on everyday sentences): natural sentences whose every word is in their
# vocabularies (tests/test_examples.py).
WORDNET: dict[str, tuple[str, ...]] = {
    "agreement": (
        "I went to the bank to deposit money.",
        "The keys to the old cabinet are on the table.",
        "The students in the back of the room are asking the teacher a question.",
        "The pictures of the famous painter in the museum are expensive.",
        "The children who live near the river are happy.",
    ),
    "prompt": ("The old man", "I went to the bank to deposit", "The river bank was covered with",
               "He opened the door and"),
    "distance": ("The keys to the cabinet in the old kitchen near the big windows of the house are",
                 "The cake that my mother made for the children was", "The man near the old tables is"),
    "order": ("The dog bit the man.", "The man bit the dog.", "The keys to the old cabinet are on the table."),
    "masked": ("The keys to the cabinet [MASK] on the table.", "I went to the [MASK] to deposit money.",
               "She put the cup on the [MASK].", "The children who live near the river [MASK] happy."),
    "attention": ("The animal did not cross the street because it was too tired.",
                  "The animal did not cross the street because it was too wide."),
    "words": ("king queen man woman prince princess boy girl", COLOURS, "dog dogs cat cats horse horses mouse mice",
              "one two three four five first second third"),
    "contrast": ("The keys to the cabinet",),  # in CONTRASTS: "The key to the cabinet", are / is
}
NATURAL["decide"] = DECIDE
# The shipped task models' own languages (explorer.training.task_models): reviews for the sentiment classifier, words
# whose part of speech their context decides for the tagger; their other views read the same sentences.
SENTIMENT: dict[str, tuple[str, ...]] = {
    "decide": ("The film was good but the ending was not.", "The food was not bad at all.",
               "I did not enjoy the trip.", "What a lovely day at the beach!", "The staff were not friendly."),
    "contrast": ("The food was not good.", "The staff were not friendly.")}
POS: dict[str, tuple[str, ...]] = {
    "decide": ("They went for a long run.", "They run to school every morning.", "Please turn on the light.",
               "This bag is very light.", "We walked back home."),
    "contrast": ("Please turn on the light", "It was a good run")}
# Their pairs to patch: two of the model's labels instead of two next words (a tagger's: its last word's label).
CONTRASTS.update({
    "The food was not good.": ("The food was very good.", "negative", "positive"),
    "The staff were not friendly.": ("The staff were very friendly.", "negative", "positive"),
    "Please turn on the light": ("Please make it very light", "noun", "adjective"),
    "It was a good run": ("I will go and run", "noun", "verb")})
LANGUAGES = {"english": ENGLISH, "sentiment": SENTIMENT, "pos": POS, "wordnet": WORDNET, "everyday": WORDNET,
             "translation": TRANSLATION, "dates": DATES,
             "natural": NATURAL}
# What a model that reads left to right gets instead, per language and purpose (see PRONOUN_PAIRS).
LEFT_TO_RIGHT: dict[str, dict[str, tuple[str, ...]]] = {
    "natural": {"attention": (PRONOUN_PAIRS[True][0], NATURAL["attention"][1], PRONOUN_PAIRS[True][1])},
}
FALLBACK = ("agreement", "translation")  # a language without the purpose offers these instead


@dataclass(frozen=True)
class Examples:
    """The sentences a view offers for one model and purpose (the first is the default), and a note for the user
    when they could not all be read in full (empty otherwise)."""

    sentences: tuple[str, ...]
    note: str = ""
    language: str = ""

    @property
    def default(self) -> str:
        return self.sentences[0] if self.sentences else ""


def sentences(language: str, purpose: str, one_way: bool = False) -> tuple[str, ...]:
    """The candidate sentences of a language for a purpose (its fallback purpose when it has none); one_way: for a
    model that reads left to right (LEFT_TO_RIGHT first)."""
    if one_way and LEFT_TO_RIGHT.get(language, {}).get(purpose):
        return LEFT_TO_RIGHT[language][purpose]
    table = LANGUAGES[language]
    for name in (purpose, *FALLBACK):
        if table.get(name):
            return table[name]
    return next(iter(table.values()))
