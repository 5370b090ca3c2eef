"""A small probabilistic grammar of English for training and probing language models.

Everything is generated, nothing is downloaded. Sentences are lowercase token lists
ending in ``"."`` or ``"?"``; the same seed always gives the same corpus (only a
private ``random.Random(seed)`` is used).

What the grammar is for:

* **Subject-verb agreement at a distance.** Subjects carry prepositional phrases
  and subject-/object-relative clauses (nested up to depth 2), so the verb that
  agrees with the head noun can be 5-15 tokens away, often with an *attractor*
  (a noun of the other number) in between: ``the keys to the old cabinet are``,
  ``the dog that the farmers feed sleeps``. :func:`agreement_pairs` builds the
  Linzen et al. (2016) number-prediction test from the same tables.
* **Bracket-like structure.** Quotes (``" ... "``) and parentheses (``( ... )``)
  open and close around whole clauses.
* **Semantic classes.** :data:`WORD_CLASSES` groups words (animals, foods,
  colours, professions, ...) for embedding-projection demos; :func:`word_class`
  looks one up.

Tables (plain data, also used by the tests to check agreement independently):
:data:`NOUNS` (class -> ``[(singular, plural), ...]``), :data:`VERBS`,
:data:`NOUN_NUMBER` (noun form -> ``"sg"``/``"pl"``), :data:`VERB_NUMBER`
(present-tense / was-were form -> ``"sg"``/``"pl"``).
"""

from __future__ import annotations

import random
from typing import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "TRAIN_SEED", "HELDOUT_SEED", "WORD_CLASSES", "NOUNS", "VERBS", "Verb", "ADJECTIVES",
    "NOUN_NUMBER", "VERB_NUMBER", "PRESETS", "AgreementPair", "word_class",
    "generate_sentences", "heldout_sentences", "agreement_pairs", "vocabulary",
]

TRAIN_SEED = 1
HELDOUT_SEED = 2

# --------------------------------------------------------------------------- morphology
_IRREGULAR_PLURALS = {
    "child": "children", "man": "men", "woman": "women", "mouse": "mice", "foot": "feet",
    "tooth": "teeth", "goose": "geese", "person": "people", "knife": "knives", "shelf": "shelves",
    "wolf": "wolves", "leaf": "leaves", "loaf": "loaves", "scarf": "scarves", "calf": "calves",
    "thief": "thieves", "wife": "wives", "potato": "potatoes", "tomato": "tomatoes", "hero": "heroes",
}


def _plural(noun: str) -> str:
    if noun in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[noun]
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _third_person(verb: str) -> str:
    if verb == "have":
        return "has"
    if verb.endswith(("s", "x", "z", "ch", "sh", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _regular_past(verb: str) -> str:
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


# --------------------------------------------------------------------------- nouns
_NOUN_TEXT = {
    "animals": "dog cat horse cow sheep_ pig goat mouse rabbit fox wolf bear lion tiger elephant monkey "
               "bird duck chicken goose owl snake frog fish_ donkey deer_ squirrel parrot",
    "foods": "apple banana orange_ cake bread_ potato tomato carrot sandwich egg cookie pie lemon "
             "onion pear cherry grape peach melon loaf",
    "people": "man woman child boy girl baby friend neighbour person student stranger guest king queen",
    "professions": "teacher doctor farmer nurse pilot driver lawyer baker painter singer soldier "
                   "scientist engineer artist writer dancer manager waiter student_ thief hero "
                   "programmer officer musician gardener",
    "places": "house room kitchen garden office school station market park farm shop city village "
              "street bridge church hospital library museum hotel floor building restaurant castle "
              "river lake forest island",
    "furniture": "table chair sofa bed cabinet desk shelf lamp cupboard bench drawer mirror wardrobe "
                 "bookcase stool",
    "tools": "hammer knife saw_ key spoon fork brush ladder rope bucket needle axe shovel scissors_ "
             "screwdriver",
    "vehicles": "car bus truck bicycle train boat ship plane taxi tractor motorbike van",
    "body": "arm leg hand foot tooth head eye ear nose finger shoulder knee",
    "clothing": "shirt hat coat shoe sock dress jacket scarf glove skirt boot sweater belt",
    "things": "book letter computer machine box bottle cup phone picture door window clock bag "
              "ball toy ticket newspaper umbrella candle bell basket",
}
# Words marked with "_" are ambiguous (sheep, fish, deer, ...) or collide with a verb/another
# class (saw, orange); they are left out so every noun form has exactly one number and class.
NOUNS: dict[str, list[tuple[str, str]]] = {
    cls: [(w, _plural(w)) for w in text.split() if not w.endswith("_")] for cls, text in _NOUN_TEXT.items()
}
NOUN_NUMBER: dict[str, str] = {}
NOUN_CLASS: dict[str, str] = {}
for _cls, _pairs in NOUNS.items():
    for _sg, _pl in _pairs:
        NOUN_NUMBER[_sg], NOUN_NUMBER[_pl] = "sg", "pl"
        NOUN_CLASS[_sg] = NOUN_CLASS[_pl] = _cls

PERSON = ("people", "professions")
ANIMATE = ("animals", "people", "professions")
OBJECTS = ("furniture", "tools", "vehicles", "clothing", "things", "foods")
ARTEFACTS = ("furniture", "tools", "vehicles", "clothing", "things")
CONCRETE = ANIMATE + OBJECTS
ALL_NOUN_CLASSES = tuple(NOUNS)
# Nouns that can be the object of a locative preposition ("on the table", "near the river").
LOCATIONS = ("places", "furniture", "vehicles")

# --------------------------------------------------------------------------- adjectives
_ADJ_TEXT = {
    "adj_size": ("big small tiny huge large little long short heavy", CONCRETE + ("places", "body")),
    "adj_body": ("sore injured strong", ("body",)),
    "adj_age": ("old new ancient modern", ARTEFACTS + ("places",)),
    "adj_youth": ("young", ANIMATE),
    "adj_quality": ("good bad nice beautiful ugly strange famous cheap expensive clean dirty quiet noisy "
                    "dangerous broken empty warm cold", ARTEFACTS + ("places",)),
    "adj_character": ("happy sad hungry tired angry friendly lazy clever brave busy polite sick", ANIMATE),
    "adj_food": ("fresh delicious sweet sour rotten", ("foods",)),
    "colours": ("red blue green yellow black white brown grey purple pink", ARTEFACTS + ("animals",)),
    "adj_origin": ("european french italian german local foreign", ANIMATE + ARTEFACTS + ("foods",)),
    "adj_material": ("wooden metal plastic glass stone woollen leather paper cotton", ARTEFACTS),
}
ADJECTIVES: dict[str, list[str]] = {cls: text.split() for cls, (text, _) in _ADJ_TEXT.items()}
# Prenominal order: quality/character, size, age, colour, origin, material ("the nice big old red wooden table").
_ADJ_ORDER = ["adj_quality", "adj_body", "adj_character", "adj_food", "adj_size", "adj_age", "adj_youth", "colours",
              "adj_origin", "adj_material"]
_ADJ_RANK = {w: _ADJ_ORDER.index(cls) for cls, ws in ADJECTIVES.items() for w in ws}
_ADJ_FOR_CLASS: dict[str, list[str]] = {
    ncls: [w for text, targets in _ADJ_TEXT.values() if ncls in targets for w in text.split()] for ncls in NOUNS
}
# Predicative adjectives ("the keys are heavy"): same tables minus material/origin.
_PRED_ADJ_FOR_CLASS: dict[str, list[str]] = {
    ncls: [w for w in ws if _ADJ_RANK[w] < _ADJ_ORDER.index("adj_origin")] for ncls, ws in _ADJ_FOR_CLASS.items()
}


# --------------------------------------------------------------------------- verbs
@dataclass(frozen=True)
class Verb:
    """One verb lexeme. ``subj``/``obj`` are allowed noun classes (``obj`` empty: intransitive)."""

    base: str
    subj: tuple[str, ...]
    obj: tuple[str, ...] = ()
    past: str = ""
    participle: str = ""
    needs_location: bool = False
    kind: str = "action"  # "action" | "speech"

    @property
    def third(self) -> str:
        return _third_person(self.base)

    @property
    def past_form(self) -> str:
        return self.past or _regular_past(self.base)

    @property
    def participle_form(self) -> str:
        return self.participle or self.past_form

    @property
    def transitive(self) -> bool:
        return bool(self.obj)

    def forms(self) -> list[str]:
        return [self.base, self.third, self.past_form, self.participle_form]


VERBS: list[Verb] = [
    # intransitive
    Verb("sleep", ANIMATE, past="slept"),
    Verb("run", ANIMATE, past="ran", participle="run"),
    Verb("wait", PERSON),
    Verb("smile", PERSON),
    Verb("laugh", PERSON),
    Verb("sing", PERSON + ("animals",), past="sang", participle="sung"),
    Verb("swim", ANIMATE, past="swam", participle="swum"),
    Verb("jump", ANIMATE),
    Verb("dance", PERSON),
    Verb("cry", PERSON),
    Verb("arrive", PERSON + ("vehicles",)),
    Verb("live", ANIMATE),
    Verb("work", PERSON + ("things",)),
    Verb("crash", ("vehicles", "things")),
    Verb("break", ARTEFACTS, past="broke", participle="broken"),
    Verb("fall", CONCRETE, past="fell", participle="fallen"),
    Verb("disappear", CONCRETE),
    Verb("shine", ("things", "vehicles"), past="shone"),
    Verb("ache", ("body",)),
    Verb("bleed", ("body",), past="bled"),
    Verb("grow", ("places", "animals", "people", "foods"), past="grew", participle="grown"),
    Verb("burn", ("places", "furniture", "things", "foods")),
    # transitive
    Verb("feed", PERSON, ("animals", "people"), past="fed"),
    Verb("chase", ("animals",) + PERSON, ("animals", "vehicles", "people")),
    Verb("see", ANIMATE, CONCRETE + ("places",), past="saw", participle="seen"),
    Verb("like", ANIMATE, CONCRETE + ("places",)),
    Verb("love", PERSON, CONCRETE + ("places",)),
    Verb("hate", ANIMATE, CONCRETE),
    Verb("eat", ANIMATE, ("foods",), past="ate", participle="eaten"),
    Verb("buy", PERSON, OBJECTS, past="bought"),
    Verb("sell", PERSON, OBJECTS + ("animals",), past="sold"),
    Verb("repair", PERSON, ARTEFACTS),
    Verb("clean", PERSON, ARTEFACTS + ("places",)),
    Verb("carry", ANIMATE, OBJECTS + ("people",)),
    Verb("paint", PERSON, ("furniture", "vehicles", "places", "things")),
    Verb("wash", PERSON, ("clothing", "vehicles", "body", "foods", "animals")),
    Verb("find", ANIMATE, OBJECTS, past="found"),
    Verb("lose", PERSON, OBJECTS, past="lost"),
    Verb("own", PERSON, ("animals", "vehicles", "places", "things", "furniture")),
    Verb("visit", PERSON, ("places", "people", "professions")),
    Verb("build", PERSON, ("furniture", "places"), past="built"),
    Verb("open", PERSON, ("things",)),
    Verb("follow", ANIMATE, ANIMATE + ("vehicles",)),
    Verb("hold", PERSON, OBJECTS + ("animals",), past="held"),
    Verb("bring", PERSON, OBJECTS, past="brought"),
    Verb("need", PERSON, OBJECTS),
    Verb("want", ANIMATE, OBJECTS),
    Verb("wear", PERSON, ("clothing",), past="wore", participle="worn"),
    Verb("drive", PERSON, ("vehicles",), past="drove", participle="driven"),
    Verb("move", PERSON, ("furniture", "vehicles", "things")),
    Verb("hurt", ANIMATE, ("body",), past="hurt"),
    Verb("put", PERSON, OBJECTS, past="put", needs_location=True),
    Verb("leave", PERSON, OBJECTS, past="left", needs_location=True),
    Verb("hide", PERSON, OBJECTS, past="hid", participle="hidden", needs_location=True),
    # speech verbs introduce quotes
    Verb("say", PERSON, past="said", kind="speech"),
    Verb("shout", PERSON, kind="speech"),
    Verb("whisper", PERSON, kind="speech"),
    Verb("reply", PERSON, kind="speech"),
]
_ACTION_VERBS = [v for v in VERBS if v.kind == "action"]
_SPEECH_VERBS = [v for v in VERBS if v.kind == "speech"]
BE = {"sg": "is", "pl": "are", "sg_past": "was", "pl_past": "were"}
HAVE = {"sg": "has", "pl": "have", "past": "had"}

# Present-tense and was/were forms that mark number (what an agreement test predicts).
VERB_NUMBER: dict[str, str] = {"is": "sg", "are": "pl", "was": "sg", "were": "pl", "has": "sg", "have": "pl",
                               "does": "sg", "do": "pl"}
for _v in VERBS:
    VERB_NUMBER[_v.third] = "sg"
    VERB_NUMBER[_v.base] = "pl"

# --------------------------------------------------------------------------- function words
DETERMINERS_SG = ["the"] * 8 + ["a"] * 3 + ["this", "that", "every", "my", "his", "her", "our", "their", "your"]
DETERMINERS_PL = ["the"] * 8 + ["some"] * 2 + ["these", "those", "many", "my", "his", "her", "our", "their", "your"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth"]
# Prepositions that modify nouns, with the noun classes of their objects.
NOUN_PREPOSITIONS: list[tuple[str, tuple[str, ...]]] = [
    ("on", ("furniture", "vehicles")), ("in", ("places", "vehicles", "furniture")), ("under", ("furniture",)),
    ("near", ("places", "furniture")), ("behind", ("places", "furniture", "vehicles")),
    ("beside", ("furniture", "vehicles", "places")), ("above", ("furniture", "places")),
    ("below", ("furniture",)), ("with", ARTEFACTS + ("animals",)), ("from", ("places",)),
    ("to", ("furniture", "places", "vehicles", "things")), ("of", CONCRETE + ("places",)),
    ("without", ("clothing", "tools", "things")), ("for", ANIMATE),
]
_ANIMATE_PREPOSITIONS = [("with", ("animals", "clothing", "things", "tools")), ("from", ("places",)),
                         ("near", ("places", "furniture")), ("in", ("places", "vehicles")), ("of", ANIMATE),
                         ("behind", ("furniture", "vehicles")), ("without", ("clothing", "tools", "things"))]
LOCATION_PREPOSITIONS = ["in", "on", "into", "under", "near", "behind", "beside", "onto", "inside"]
OBJECT_PRONOUNS = ["me", "him", "her", "us", "them", "you"]
PRONOUNS_SUBJ = {"i": "i", "you": "pl", "we": "pl", "they": "pl", "he": "sg", "she": "sg"}
ADVERBS_PRE = ["often", "always", "never", "usually", "sometimes", "rarely", "still"]
ADVERBS_POST = ["quickly", "slowly", "again", "quietly", "loudly", "carefully", "happily", "together"]
TIME_PRESENT = [["every", "day"], ["every", "morning"], ["today"], ["at", "night"], ["in", "the", "morning"],
                ["in", "the", "evening"], ["on", "sundays"], ["every", "week"]]
TIME_PAST = [["yesterday"], ["last", "week"], ["last", "night"], ["last", "year"], ["in", "the", "morning"],
             ["on", "monday"], ["on", "friday"], ["an", "hour", "ago"], ["two", "days", "ago"]]
CONJUNCTIONS = ["and", "but", "because", "while", "when", "although", "so"]
COMPOUND_MODIFIERS = {"places": ["machine", "school", "city", "village", "hospital", "office", "kitchen"],
                      "furniture": ["kitchen", "office", "garden", "school", "bedroom"],
                      "things": ["kitchen", "office", "school", "train"],
                      "vehicles": ["school", "city", "farm", "police"]}

WORD_CLASSES: dict[str, list[str]] = {}
for _cls, _pairs in NOUNS.items():
    WORD_CLASSES[_cls] = [w for pair in _pairs for w in pair]
for _cls, _ws in ADJECTIVES.items():
    WORD_CLASSES[_cls] = list(_ws)
WORD_CLASSES["verbs_intransitive"] = sorted({f for v in _ACTION_VERBS if not v.transitive for f in v.forms()})
WORD_CLASSES["verbs_transitive"] = sorted({f for v in _ACTION_VERBS if v.transitive for f in v.forms()}
                                          - set(WORD_CLASSES["verbs_intransitive"]))
WORD_CLASSES["verbs_speech"] = sorted({f for v in _SPEECH_VERBS for f in v.forms()})
WORD_CLASSES["verbs_auxiliary"] = ["is", "are", "was", "were", "am", "has", "have", "had", "do", "does", "did"]
WORD_CLASSES["numbers"] = list(NUMBERS)
WORD_CLASSES["ordinals"] = list(ORDINALS)
WORD_CLASSES["determiners"] = sorted(set(DETERMINERS_SG + DETERMINERS_PL + ["an"]) - set(NUMBERS))
WORD_CLASSES["pronouns"] = list(PRONOUNS_SUBJ) + [p for p in OBJECT_PRONOUNS if p not in PRONOUNS_SUBJ]
WORD_CLASSES["relativizers"] = ["that", "who", "which"]
WORD_CLASSES["prepositions"] = sorted({p for p, _ in NOUN_PREPOSITIONS} | set(LOCATION_PREPOSITIONS) | {"at", "ago"})
WORD_CLASSES["adverbs"] = ADVERBS_PRE + ADVERBS_POST + ["just", "yesterday", "today", "there", "very"]
WORD_CLASSES["time"] = ["day", "morning", "evening", "night", "week", "year", "hour", "days", "last",
                        "sundays", "monday", "friday"]
WORD_CLASSES["conjunctions"] = list(CONJUNCTIONS)
WORD_CLASSES["compound_modifiers"] = sorted({w for ws in COMPOUND_MODIFIERS.values() for w in ws})
WORD_CLASSES["punctuation"] = [".", ",", "?", '"', "(", ")", ":"]

_WORD_TO_CLASS: dict[str, str] = {}
for _cls, _ws in WORD_CLASSES.items():
    for _w in _ws:
        _WORD_TO_CLASS.setdefault(_w, _cls)


def word_class(word: str) -> str | None:
    """Semantic/grammatical class of ``word`` (first listed in :data:`WORD_CLASSES`), or None."""
    return _WORD_TO_CLASS.get(word)


def vocabulary() -> list[str]:
    """Every word form the grammar can produce, sorted."""
    return sorted(_WORD_TO_CLASS)


# --------------------------------------------------------------------------- generation
@dataclass
class _Phrase:
    tokens: list[str]
    head: int  # index of the head noun in tokens (-1 for pronouns)
    number: str  # "sg" | "pl"
    cls: str  # noun class of the head ("pronoun" for pronouns)
    nouns: list[tuple[int, str]] = field(default_factory=list)  # (index, number) of every noun in tokens


_VERBS_BY_SUBJ = {c: [v for v in _ACTION_VERBS if c in v.subj] for c in NOUNS}
assert all(_VERBS_BY_SUBJ.values()) and all(_PRED_ADJ_FOR_CLASS.values()), "every noun class needs verbs/adjectives"
_TRANS_BY_OBJ = {c: [v for v in _ACTION_VERBS if c in v.obj] for c in NOUNS}
_PERSON_TRANS_BY_OBJ = {c: [v for v in vs if "people" in v.subj] for c, vs in _TRANS_BY_OBJ.items()}


class _Grammar:
    """Recursive generator; every random choice goes through ``self.rng``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    # -- small helpers
    def p(self, prob: float) -> bool:
        return self.rng.random() < prob

    def choice(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def number(self) -> str:
        return "sg" if self.rng.random() < 0.5 else "pl"

    @staticmethod
    def fix_articles(tokens: list[str]) -> list[str]:
        """a -> an before a vowel sound."""
        out = list(tokens)
        for i in range(len(out) - 1):
            if out[i] in ("a", "an"):
                nxt = out[i + 1]
                vowel = nxt[0] in "aeiou" and not nxt.startswith(("eu", "uni", "use", "one"))
                out[i] = "an" if vowel or nxt == "hour" else "a"
        return out

    def verb_form(self, verb: Verb, number: str, tense: str, person: str = "") -> str:
        if tense == "past":
            return verb.past_form
        return verb.third if number == "sg" and person != "i" else verb.base

    def be(self, number: str, tense: str, person: str = "") -> str:
        if person == "i":
            return "was" if tense == "past" else "am"
        return BE[f"{number}_past"] if tense == "past" else BE[number]

    # -- noun phrases
    def simple_np(self, classes: tuple[str, ...], number: str | None = None, adj_prob: float = 0.35,
                  allow_numeral: bool = True) -> _Phrase:
        cls = self.choice(classes)
        number = number or self.number()
        sg, pl = self.choice(NOUNS[cls])
        noun = sg if number == "sg" else pl
        if number == "pl" and allow_numeral and self.p(0.12):
            det = self.choice(NUMBERS)
        else:
            det = self.choice(DETERMINERS_SG if number == "sg" else DETERMINERS_PL)
        tokens = [det]
        if self.p(adj_prob):
            adjs = [self.choice(_ADJ_FOR_CLASS[cls])]
            if self.p(0.3):
                second = self.choice(_ADJ_FOR_CLASS[cls])
                if _ADJ_RANK[second] != _ADJ_RANK[adjs[0]]:
                    adjs.append(second)
            tokens += sorted(adjs, key=_ADJ_RANK.__getitem__)
        if cls in COMPOUND_MODIFIERS and self.p(0.08):
            tokens.append(self.choice(COMPOUND_MODIFIERS[cls]))
        tokens.append(noun)
        return _Phrase(tokens, len(tokens) - 1, number, cls, [(len(tokens) - 1, number)])

    def location_np(self, adj_prob: float) -> _Phrase:
        """Object of a locative preposition: a place, piece of furniture or vehicle, no numeral."""
        return self.simple_np(LOCATIONS, adj_prob=adj_prob, allow_numeral=False)

    def _attach(self, phrase: _Phrase, extra: _Phrase, prefix: list[str], suffix: Sequence[str] = ()) -> None:
        offset = len(phrase.tokens) + len(prefix)
        phrase.tokens += list(prefix) + extra.tokens + list(suffix)
        phrase.nouns += [(i + offset, n) for i, n in extra.nouns]

    def np(self, classes: tuple[str, ...], number: str | None = None, depth: int = 2, mod_prob: float = 0.45,
           tense: str = "present") -> _Phrase:
        """Noun phrase, possibly modified by a PP or a relative clause (recursively, ``depth`` levels)."""
        phrase = self.simple_np(classes, number)
        if depth > 0 and self.p(mod_prob):
            self.modify(phrase, depth, tense)
        return phrase

    def modify(self, phrase: _Phrase, depth: int, tense: str, kind: str | None = None) -> None:
        """Append a post-modifier to ``phrase``: ``pp`` | ``subj_rel`` | ``obj_rel`` | ``perfect_rel``."""
        cls = phrase.cls
        if kind is None:
            kind = self.choice(["pp", "pp", "subj_rel", "obj_rel", "obj_rel", "perfect_rel"])
        if kind == "pp":
            preps = _ANIMATE_PREPOSITIONS if cls in ANIMATE else NOUN_PREPOSITIONS
            prep, obj_classes = self.choice(preps)
            inner = self.np(obj_classes, depth=depth - 1, mod_prob=0.3, tense=tense)
            self._attach(phrase, inner, [prep])
            return
        rel = ("who" if cls in PERSON else "which") if self.p(0.5) else "that"
        if kind == "subj_rel":
            if self.p(0.2):
                tns = self.choice(["present", "past"])
                phrase.tokens += [rel, self.be(phrase.number, tns), self.choice(_PRED_ADJ_FOR_CLASS[cls])]
                return
            verb = self.choice(_VERBS_BY_SUBJ[cls])
            tns = self.choice(["present", "present", "past"])
            phrase.tokens += [rel, self.verb_form(verb, phrase.number, tns)]
            if verb.transitive:
                obj = self.np(verb.obj, depth=depth - 1, mod_prob=0.25, tense=tns)
                self._attach(phrase, obj, [])
            if verb.needs_location or (not verb.transitive and self.p(0.3)):
                self._attach(phrase, self.location_np(0.2), [self.choice(LOCATION_PREPOSITIONS)])
            return
        verbs = (_PERSON_TRANS_BY_OBJ if kind == "perfect_rel" else _TRANS_BY_OBJ).get(cls) or []
        if not verbs:
            self.modify(phrase, depth, tense, "pp")
            return
        verb = self.choice(verbs)
        if kind == "perfect_rel":
            # "the computer which i had just put into the machine room on the fifth floor"
            pron = self.choice(list(PRONOUNS_SUBJ))
            phrase.tokens += [rel, pron, "had"] + (["just"] if self.p(0.5) else []) + [verb.participle_form]
            if verb.needs_location or self.p(0.3):
                loc = self.simple_np(("places",) if verb.needs_location else LOCATIONS, adj_prob=0.2,
                                     allow_numeral=False)
                self._attach(phrase, loc, [self.choice(LOCATION_PREPOSITIONS if verb.needs_location else ["in"])])
                if loc.cls == "places" and self.p(0.4):
                    self._attach(phrase, _Phrase(["the", self.choice(ORDINALS), "floor"], 2, "sg", "places",
                                                 [(2, "sg")]), ["on"])
            return
        # object relative: "the dog that the farmers (who ...) feed"
        subj_classes = tuple(c for c in verb.subj if c in NOUNS)
        if self.p(0.15):
            pron = self.choice(list(PRONOUNS_SUBJ))
            tns = self.choice(["present", "past"])
            phrase.tokens += [rel, pron, self.verb_form(verb, PRONOUNS_SUBJ[pron], tns, pron)]
        else:
            inner = self.np(subj_classes, depth=depth - 1, mod_prob=0.3, tense=tense)
            tns = self.choice(["present", "present", "past"])
            self._attach(phrase, inner, [rel], [self.verb_form(verb, inner.number, tns)])
        if verb.needs_location:
            self._attach(phrase, self.location_np(0.2), [self.choice(LOCATION_PREPOSITIONS)])

    # -- clauses
    def subject(self, depth: int = 2, tense: str = "present", pronoun_prob: float = 0.12) -> _Phrase:
        if self.p(pronoun_prob):
            pron = self.choice(list(PRONOUNS_SUBJ))
            return _Phrase([pron], -1, PRONOUNS_SUBJ[pron], "pronoun" if pron != "i" else "i")
        return self.np(ALL_NOUN_CLASSES, depth=depth, mod_prob=0.5, tense=tense)

    def predicate(self, subj: _Phrase, tense: str, depth: int = 1) -> list[str]:
        """Verb phrase agreeing with ``subj``."""
        person = "i" if subj.tokens == ["i"] else ""
        cls = subj.cls if subj.cls in NOUNS else self.choice(PERSON)
        r = self.rng.random()
        if r < 0.2:
            very = ["very"] if self.p(0.2) else []
            return [self.be(subj.number, tense, person)] + very + [self.choice(_PRED_ADJ_FOR_CLASS[cls])]
        if r < 0.28:
            where = self.choice(LOCATION_PREPOSITIONS[:2] + ["near", "behind"])
            return [self.be(subj.number, tense, person), where] + self.location_np(0.3).tokens
        if r < 0.33 and cls in ANIMATE:
            # possession: "the farmers have three cows"
            have = HAVE["past"] if tense == "past" else HAVE["sg" if subj.number == "sg" and not person else "pl"]
            return [have] + self.np(("animals", "vehicles", "things", "clothing", "tools"), depth=depth,
                                    mod_prob=0.2, tense=tense).tokens
        verb = self.choice(_VERBS_BY_SUBJ[cls])
        words = []
        if tense == "present" and self.p(0.15):
            words.append(self.choice(ADVERBS_PRE))
        words.append(self.verb_form(verb, subj.number, tense, person))
        if verb.transitive and "people" in verb.obj and self.p(0.1):
            words.append(self.choice(OBJECT_PRONOUNS))
        elif verb.transitive:
            words += self.np(verb.obj, depth=depth, mod_prob=0.3, tense=tense).tokens
        if verb.needs_location or (not verb.transitive and self.p(0.35)):
            words += [self.choice(LOCATION_PREPOSITIONS)] + self.location_np(0.3).tokens
        elif self.p(0.15):
            words.append(self.choice(ADVERBS_POST))
        if self.p(0.15):
            words += self.choice(TIME_PAST if tense == "past" else TIME_PRESENT)
        return words

    def clause(self, depth: int = 2, tense: str | None = None) -> list[str]:
        tense = tense or ("past" if self.p(0.4) else "present")
        subj = self.subject(depth, tense)
        if subj.cls in NOUNS and self.p(0.07):
            # parenthetical modifier: "the farmer ( who lives near the river ) feeds the cows"
            extra = _Phrase([subj.tokens[subj.head]], 0, subj.number, subj.cls)
            self.modify(extra, 1, tense, self.choice(["pp", "subj_rel", "obj_rel"]))
            subj.tokens += ["("] + extra.tokens[1:] + [")"]
        return subj.tokens + self.predicate(subj, tense)

    def question(self) -> list[str]:
        tense = "past" if self.p(0.3) else "present"
        subj = self.subject(depth=1, tense=tense, pronoun_prob=0.1)
        person = "i" if subj.tokens == ["i"] else ""
        cls = subj.cls if subj.cls in NOUNS else self.choice(PERSON)
        if self.p(0.4):
            return [self.be(subj.number, tense, person)] + subj.tokens + [self.choice(_PRED_ADJ_FOR_CLASS[cls]), "?"]
        aux = "did" if tense == "past" else ("does" if subj.number == "sg" and not person else "do")
        verb = self.choice(_VERBS_BY_SUBJ[cls])
        words = [aux] + subj.tokens + [verb.base]
        if verb.transitive:
            words += self.np(verb.obj, depth=1, mod_prob=0.2).tokens
        if verb.needs_location:
            words += [self.choice(LOCATION_PREPOSITIONS)] + self.location_np(0.2).tokens
        return words + ["?"]

    def there_sentence(self) -> list[str]:
        number = self.number()
        tense = "past" if self.p(0.4) else "present"
        np = self.np(CONCRETE, number, depth=1, mod_prob=0.3, tense=tense)
        loc = [self.choice(["in", "on", "near", "under", "behind"])] + self.location_np(0.3).tokens
        return ["there", self.be(number, tense)] + np.tokens + loc + ["."]

    def quote(self) -> list[str]:
        tense = "past" if self.p(0.6) else "present"
        speaker = self.np(PERSON, depth=1, mod_prob=0.2, tense=tense)
        verb = self.choice(_SPEECH_VERBS)
        said = self.verb_form(verb, speaker.number, tense)
        inner = self.clause(depth=1)
        if self.p(0.5):
            return speaker.tokens + [said, ":", '"'] + inner + ['"', "."]
        return ['"'] + inner + [",", '"', said] + speaker.tokens + ["."]

    def sentence(self) -> list[str]:
        r = self.rng.random()
        if r < 0.08:
            words = self.question()
        elif r < 0.16:
            words = self.there_sentence()
        elif r < 0.24:
            words = self.quote()
        elif r < 0.34:
            first = self.clause(depth=1)
            second = self.clause(depth=1)
            if self.p(0.3):
                words = first + ["(", *second, ")", "."]
            else:
                conj = self.choice(CONJUNCTIONS)
                words = first + ([","] if conj in ("but", "so") else []) + [conj] + second + ["."]
        else:
            words = self.clause() + ["."]
        return self.fix_articles(words)


def generate_sentences(n: int, seed: int = TRAIN_SEED, max_len: int = 40,
                       stop: Callable[[], bool] | None = None) -> list[list[str]]:
    """``n`` sentences as lowercase token lists, each ending in ``"."`` or ``"?"``.

    Deterministic for a given ``seed`` (private ``random.Random``). Lengths are
    mostly 5-30 tokens; sentences longer than ``max_len`` are resampled. ``stop()``
    (asked every 1,000 sentences) ends the list early when it returns True.
    """
    gen = _Grammar(random.Random(seed))
    out: list[list[str]] = []
    while len(out) < n and not (stop is not None and len(out) % 1000 == 0 and stop()):
        words = gen.sentence()
        if 3 <= len(words) <= max_len:
            out.append(words)
    return out


def heldout_sentences(n: int, max_len: int = 40) -> list[list[str]]:
    """``n`` sentences from :data:`HELDOUT_SEED` (distinct sample from the training seed)."""
    return generate_sentences(n, HELDOUT_SEED, max_len=max_len)


# --------------------------------------------------------------------------- agreement test
@dataclass(frozen=True)
class AgreementPair:
    """One number-agreement item (Linzen et al., 2016).

    ``prefix`` is the sentence up to but excluding the verb; the head noun is
    ``prefix[len(prefix) - 1 - distance]``; ``correct``/``wrong`` are the verb in
    the head's number and in the other number (e.g. ``"are"`` / ``"is"``).
    """

    prefix: list[str]
    correct: str
    wrong: str
    distance: int
    attractors: int = 0  # nouns of the other number between head and verb
    number: str = ""  # the head noun's number: "sg" or "pl"


def agreement_pairs(n: int, seed: int = HELDOUT_SEED, min_distance: int = 4, max_distance: int = 20,
                    attractor_rate: float = 0.8) -> list[AgreementPair]:
    """``n`` agreement items whose head noun and verb are ``min_distance..max_distance``
    tokens apart; about ``attractor_rate`` of them contain at least one attractor."""
    rng = random.Random(seed)
    gen = _Grammar(rng)
    out: list[AgreementPair] = []
    while len(out) < n:
        want_attractor = rng.random() < attractor_rate
        number = gen.number()
        subj = gen.simple_np(ALL_NOUN_CLASSES, number, adj_prob=0.3, allow_numeral=False)
        tense = "present" if rng.random() < 0.8 else "past"
        if rng.random() < 0.3:  # two modifiers: a PP first, then anything ("the keys to the box that ...")
            gen.modify(subj, depth=1, tense=tense, kind="pp")
        gen.modify(subj, depth=2, tense=tense)
        distance = len(subj.tokens) - 1 - subj.head
        attractors = sum(1 for i, num in subj.nouns if i > subj.head and num != number)
        if not (min_distance <= distance <= max_distance) or (want_attractor and attractors == 0):
            continue
        prefix = gen.fix_articles(subj.tokens)
        if tense == "past" or rng.random() < 0.25:
            pair = (gen.be(number, tense), gen.be("pl" if number == "sg" else "sg", tense))
        else:
            verb = gen.choice(_VERBS_BY_SUBJ[subj.cls])
            pair = (verb.third, verb.base) if number == "sg" else (verb.base, verb.third)
        out.append(AgreementPair(prefix, pair[0], pair[1], distance, attractors, number))
    return out


PRESETS: list[str] = [
    "the keys to the old cabinet are on the table .",
    "the dog that the farmers feed sleeps in the garden .",
    "the computer which i had just put into the machine room on the fifth floor crashed .",
    'the teacher said : " the children ( who live near the river ) are happy " .',
    "the pictures of the famous painter in the museum are expensive .",
    "the woman who the doctors visited yesterday was very tired .",
    "there are two red cars near the old station .",
]
