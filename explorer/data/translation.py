"""English -> French-like translation pairs for seq2seq demos.

A small, regular fragment of the English grammar translated by rule, so a small
RNN encoder-decoder with attention can learn it almost perfectly while the
alignment stays non-monotonic in instructive ways:

* adjectives follow the noun, in mirror order:
  ``the european economic area`` -> ``la zone économique européenne``,
  ``the old wooden table`` -> ``la table boisée vieille``;
* gender and number agreement of determiners, adjectives and participles
  (``le/la/les``, ``-e``, ``-s``; a few irregular adjectives such as ``vieux/vieille``);
* verb conjugation (``mange``/``mangent``), one-to-many words
  (``ate`` -> ``a mangé``, ``near`` -> ``près de``, ``was signed`` -> ``a été signée``)
  and a discontinuous negation (``does not eat`` -> ``ne mange pas``).

The target side is produced by :func:`translate`, a deterministic left-to-right
rule translator that also returns the gold word alignment (:func:`alignment`).
Source and target are lowercase token lists without ``<bos>``/``<eos>``; source
lengths run from 3 to about 25 tokens.
"""

from __future__ import annotations

import random
from typing import Callable

from .english import _plural as _english_plural
from .english import _regular_past, _third_person
from .vocab import tokenize_words

__all__ = [
    "TRAIN_SEED", "HELDOUT_SEED", "PRESETS", "generate_pairs", "translate", "translate_with_alignment",
    "alignment", "tokenize", "source_vocabulary",
]

TRAIN_SEED = 1
HELDOUT_SEED = 2
tokenize = tokenize_words

# --------------------------------------------------------------------------- lexicon
# english  french  gender  kind (a: animate agent, o: object/thing, p: place)  [english plural] [french plural]
_NOUN_TABLE = """
dog chien m a | cat chat m a | horse cheval m a - chevaux | bird oiseau m a | cow vache f a
boy garçon m a | girl fille f a | man homme m a men | woman femme f a women | child enfant m a children
teacher professeur m a | doctor médecin m a | farmer fermier m a | student étudiant m a | friend ami m a
king roi m a | queen reine f a | singer chanteuse f a | neighbour voisin m a | nurse infirmière f a
apple pomme f o | cake gâteau m o | cheese fromage m o | letter lettre f o | computer ordinateur m o
machine machine f o | key clé f o | door porte f o | window fenêtre f o | car voiture f o
train train m o | boat bateau m o | bicycle vélo m o | shirt chemise f o | hat chapeau m o
shoe chaussure f o | box boîte f o | bottle bouteille f o | cup tasse f o | flower fleur f o
book livre m o | picture tableau m o | newspaper journal m o - journaux | song chanson f o | table table f o
chair chaise f o | bed lit m o | lamp lampe f o | agreement accord m o | report rapport m o
area zone f p | house maison f p | garden jardin m p | city ville f p | street rue f p
room chambre f p | kitchen cuisine f p | river rivière f p | school école f p | market marché m p
village village m p | mountain montagne f p | bridge pont m p | bank banque f p | station gare f p
day jour m t
"""
# english  french masculine  [feminine  masc-plural  fem-plural]  rank (English prenominal order)
_ADJ_TABLE = """
beautiful beau belle beaux belles 0 | good bon bonne - - 0 | bad mauvais - mauvais - 0
happy heureux heureuse heureux - 0 | expensive cher chère - - 0 | famous célèbre 0 | fast rapide 0
strange étrange 0 | quiet calme 0 | tired fatigué 0 | hungry affamé 0
big grand 1 | small petit 1 | long long longue - - 1 | tall haut 1 | heavy lourd 1
old vieux vieille vieux - 2 | new nouveau nouvelle nouveaux - 2 | young jeune 2 | ancient antique 2
red rouge 3 | blue bleu 3 | green vert 3 | black noir 3 | white blanc blanche - - 3 | yellow jaune 3
grey gris - gris - 3 | brown brun 3
european européen européenne - - 4 | french français - français - 4 | italian italien italienne - - 4
german allemand 4 | english anglais - anglais - 4 | american américain 4
wooden boisé 5 | metal métallique 5 | plastic plastique 5 | glass vitré 5
economic économique 6 | political politique 6 | public public publique - - 6 | national national - nationaux - 6
"""
# english base, french 3sg, french 3pl, french participle, english past, english participle, kind
# kind: i = intransitive (animate subject), t = transitive (animate subject), p = also passive (object subject)
_VERB_TABLE = """
sleep dort dorment dormi slept slept i | run court courent couru ran run i | arrive arrive arrivent arrivé - - i
sing chante chantent chanté sang sung i | dance danse dansent dansé - - i
work travaille travaillent travaillé - - i
wait attend attendent attendu - - i | laugh rit rient ri - - i | swim nage nagent nagé swam swum i
eat mange mangent mangé ate eaten p | see voit voient vu saw seen p | like aime aiment aimé - - t
buy achète achètent acheté bought bought p | sell vend vendent vendu sold sold p
find trouve trouvent trouvé found found p | open ouvre ouvrent ouvert - - p
write écrit écrivent écrit wrote written p | build construit construisent construit built built p
paint peint peignent peint - - p | carry transporte transportent transporté - - p
watch regarde regardent regardé - - t | sign signe signent signé - - p
visit visite visitent visité - - p | repair répare réparent réparé - - p
follow suit suivent suivi - - t | want veut veulent voulu - - t | clean nettoie nettoient nettoyé - - p
"""
DETERMINERS: dict[str, tuple[str | None, str | None, str | None]] = {
    # english: (masc sg, fem sg, plural); None where the determiner has no such number
    "the": ("le", "la", "les"), "a": ("un", "une", None), "an": ("un", "une", None), "some": (None, None, "des"),
    "this": ("ce", "cette", None), "these": (None, None, "ces"), "my": ("mon", "ma", "mes"),
    "his": ("son", "sa", "ses"), "her": ("son", "sa", "ses"), "our": ("notre", "notre", "nos"),
    "their": ("leur", "leur", "leurs"), "every": ("chaque", "chaque", None),
    "two": (None, None, "deux"), "three": (None, None, "trois"), "four": (None, None, "quatre"),
    "five": (None, None, "cinq"),
}
PREPOSITIONS = {"of": ["de"], "with": ["avec"], "near": ["près", "de"], "on": ["sur"], "in": ["dans"],
                "under": ["sous"], "behind": ["derrière"], "for": ["pour"], "by": ["par"]}
PRONOUNS = {"he": ("il", "m", "sg"), "she": ("elle", "f", "sg"), "they": ("ils", "m", "pl")}
MONTHS = {"january": "janvier", "february": "février", "march": "mars", "april": "avril", "may": "mai",
          "june": "juin", "july": "juillet", "august": "août", "september": "septembre",
          "october": "octobre", "november": "novembre", "december": "décembre"}
YEARS = [str(y) for y in range(1990, 2000)]
ADVERBS = {"yesterday": ["hier"], "today": ["aujourd'hui"], "very": ["très"]}
COPULA = {"is": ("est", "sg"), "are": ("sont", "pl"), "was": ("était", "sg"), "were": ("étaient", "pl")}


def _french_plural(word: str) -> str:
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith("eau"):
        return word + "x"
    return word + "s"


def _feminine(word: str) -> str:
    return word if word.endswith("e") else word + "e"


class _Noun:
    __slots__ = ("en", "en_pl", "fr", "fr_pl", "gender", "kind")

    def __init__(self, en, fr, gender, kind, en_pl="-", fr_pl="-"):
        self.en, self.fr, self.gender, self.kind = en, fr, gender, kind
        self.en_pl = _english_plural(en) if en_pl == "-" else en_pl
        self.fr_pl = _french_plural(fr) if fr_pl == "-" else fr_pl


class _Adj:
    __slots__ = ("en", "forms", "rank")

    def __init__(self, en, rank, m, f="-", mpl="-", fpl="-"):
        f = _feminine(m) if f == "-" else f
        mpl = _french_plural(m) if mpl == "-" else mpl
        fpl = _french_plural(f) if fpl == "-" else fpl
        self.en, self.rank = en, int(rank)
        self.forms = {("m", "sg"): m, ("f", "sg"): f, ("m", "pl"): mpl, ("f", "pl"): fpl}


class _Verb:
    __slots__ = ("base", "third", "past", "participle", "fr3sg", "fr3pl", "frpp", "kind")

    def __init__(self, base, fr3sg, fr3pl, frpp, past, participle, kind):
        self.base, self.fr3sg, self.fr3pl, self.frpp, self.kind = base, fr3sg, fr3pl, frpp, kind
        self.third = _third_person(base)
        self.past = _regular_past(base) if past == "-" else past
        self.participle = self.past if participle == "-" else participle


def _rows(table: str) -> list[list[str]]:
    return [row.split() for row in table.replace("\n", "|").split("|") if row.strip()]


NOUNS: list[_Noun] = [_Noun(_r[0], _r[1], _r[2], _r[3], *(_r[4:] + ["-", "-"])[:2]) for _r in _rows(_NOUN_TABLE)]
ADJECTIVES: list[_Adj] = [_Adj(_r[0], _r[-1], *_r[1:-1]) for _r in _rows(_ADJ_TABLE)]
VERBS: list[_Verb] = [_Verb(*_r) for _r in _rows(_VERB_TABLE)]

_NOUN_FORMS: dict[str, tuple[_Noun, str]] = {}
for _n in NOUNS:
    _NOUN_FORMS[_n.en] = (_n, "sg")
    _NOUN_FORMS[_n.en_pl] = (_n, "pl")
_ADJ_BY_EN = {a.en: a for a in ADJECTIVES}
_VERB_PRESENT: dict[str, tuple[_Verb, str]] = {}
_VERB_BASE: dict[str, _Verb] = {}
_VERB_PAST: dict[str, _Verb] = {}
_VERB_PARTICIPLE: dict[str, _Verb] = {}
for _v in VERBS:
    _VERB_PRESENT[_v.third] = (_v, "sg")
    _VERB_PRESENT[_v.base] = (_v, "pl")
    _VERB_BASE[_v.base] = _v
    _VERB_PAST[_v.past] = _v
    if _v.kind == "p":
        _VERB_PARTICIPLE[_v.participle] = _v


def source_vocabulary() -> list[str]:
    """Every source word the fragment can produce, sorted."""
    words = set(_NOUN_FORMS) | set(_ADJ_BY_EN) | set(_VERB_PRESENT) | set(_VERB_PAST) | set(_VERB_PARTICIPLE)
    words |= set(DETERMINERS) | set(PREPOSITIONS) | set(PRONOUNS) | set(MONTHS) | set(YEARS) | set(ADVERBS)
    words |= set(COPULA) | {"does", "do", "not", "."}
    return sorted(words)


# --------------------------------------------------------------------------- rule translator
def translate_with_alignment(src: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """Translate a source token list of the fragment; returns ``(target, alignment)`` where
    alignment holds ``(source index, target index)`` pairs. Raises ``ValueError`` for words
    or constructions outside the fragment."""
    src = list(src)
    tgt: list[str] = []
    links: list[tuple[int, int]] = []

    def emit(word: str, *src_idx: int) -> None:
        for i in src_idx:
            links.append((i, len(tgt)))
        tgt.append(word)

    # subject features (gender, number): first pronoun or noun of the sentence
    subj_gender, subj_number = None, None
    for tok in src:
        if tok in PRONOUNS:
            _, subj_gender, subj_number = PRONOUNS[tok]
            break
        if tok in _NOUN_FORMS:
            noun, subj_number = _NOUN_FORMS[tok]
            subj_gender = noun.gender
            break
    if subj_number is None:
        raise ValueError("sentence has no subject noun or pronoun")

    def next_noun(i: int) -> tuple[int, _Noun, str]:
        j = i
        while j < len(src) and src[j] in _ADJ_BY_EN:
            j += 1
        if j >= len(src) or src[j] not in _NOUN_FORMS:
            raise ValueError(f"expected a noun after {' '.join(src[i - 1:j])!r}")
        return (j, *_NOUN_FORMS[src[j]])

    i = 0
    while i < len(src):
        tok = src[i]
        if tok in DETERMINERS:
            j, noun, number = next_noun(i + 1)
            m, f, pl = DETERMINERS[tok]
            word = pl if number == "pl" else (f if noun.gender == "f" else m)
            if word is None:
                raise ValueError(f"{tok!r} cannot go with {src[j]!r}")
            emit(word, i)
            i += 1
        elif tok in _ADJ_BY_EN:
            j = i
            while j < len(src) and src[j] in _ADJ_BY_EN:
                j += 1
            if j < len(src) and src[j] in _NOUN_FORMS:  # attributive: noun first, adjectives mirrored
                noun, number = _NOUN_FORMS[src[j]]
                emit(noun.fr_pl if number == "pl" else noun.fr, j)
                for k in range(j - 1, i - 1, -1):
                    emit(_ADJ_BY_EN[src[k]].forms[(noun.gender, number)], k)
                i = j + 1
            else:  # predicative: agrees with the subject
                for k in range(i, j):
                    emit(_ADJ_BY_EN[src[k]].forms[(subj_gender, subj_number)], k)
                i = j
        elif tok in _NOUN_FORMS:
            noun, number = _NOUN_FORMS[tok]
            emit(noun.fr_pl if number == "pl" else noun.fr, i)
            i += 1
        elif tok in PRONOUNS:
            emit(PRONOUNS[tok][0], i)
            i += 1
        elif tok in COPULA:
            nxt = src[i + 1] if i + 1 < len(src) else ""
            if tok in ("was", "were") and nxt in _VERB_PARTICIPLE:  # passive: a été signée
                verb = _VERB_PARTICIPLE[nxt]
                emit("a" if subj_number == "sg" else "ont", i)
                emit("été", i)
                pp = _feminine(verb.frpp) if subj_gender == "f" else verb.frpp
                emit(_french_plural(pp) if subj_number == "pl" else pp, i + 1)
                i += 2
            else:
                emit(COPULA[tok][0], i)
                i += 1
        elif tok in ("does", "do"):
            if i + 2 >= len(src) or src[i + 1] != "not" or src[i + 2] not in _VERB_BASE:
                raise ValueError(f"expected '{tok} not VERB'")
            verb = _VERB_BASE[src[i + 2]]
            emit("ne", i + 1)
            emit(verb.fr3sg if tok == "does" else verb.fr3pl, i, i + 2)
            emit("pas", i + 1)
            i += 3
        elif tok in _VERB_PRESENT:
            verb, number = _VERB_PRESENT[tok]
            emit(verb.fr3sg if number == "sg" else verb.fr3pl, i)
            i += 1
        elif tok in _VERB_PAST:
            verb = _VERB_PAST[tok]
            emit("a" if subj_number == "sg" else "ont", i)
            emit(verb.frpp, i)
            i += 1
        elif tok == "in" and i + 1 < len(src) and src[i + 1] in MONTHS:
            emit("en", i)
            emit(MONTHS[src[i + 1]], i + 1)
            i += 2
            if i < len(src) and src[i] in YEARS:
                emit(src[i], i)
                i += 1
        elif tok in PREPOSITIONS or tok in ADVERBS:
            for word in PREPOSITIONS.get(tok) or ADVERBS[tok]:
                emit(word, i)
            i += 1
        elif tok in (".", "?", ","):
            emit(tok, i)
            i += 1
        else:
            raise ValueError(f"word {tok!r} is outside the translation fragment")
    return tgt, links


def translate(src: list[str]) -> list[str]:
    """Reference translation of a source token list (see :func:`translate_with_alignment`)."""
    return translate_with_alignment(src)[0]


def alignment(src: list[str], tgt: list[str]) -> list[tuple[int, int]]:
    """Gold ``(source index, target index)`` links for a pair produced by this module.
    Raises ``ValueError`` when ``tgt`` is not the reference translation of ``src``."""
    ref, links = translate_with_alignment(src)
    if list(tgt) != ref:
        raise ValueError("target is not the reference translation of the source")
    return links


# --------------------------------------------------------------------------- generator
_AGENTS = [n for n in NOUNS if n.kind == "a"]
_THINGS = [n for n in NOUNS if n.kind in ("o", "p")]
_OBJECTS = [n for n in NOUNS if n.kind in ("a", "o", "p")]
_PLACES = [n for n in NOUNS if n.kind == "p"]
_INTRANSITIVE = [v for v in VERBS if v.kind == "i"]
_TRANSITIVE = [v for v in VERBS if v.kind in ("t", "p")]
_PASSIVE = [v for v in VERBS if v.kind == "p"]
_NP_PREPS = ["of", "with", "near", "on", "in", "under", "behind", "for"]
_SG_DETS = [d for d, forms in DETERMINERS.items() if forms[0] is not None and d != "an"]
_PL_DETS = [d for d, forms in DETERMINERS.items() if forms[2] is not None]


class _Generator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def choice(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def adjectives(self, max_count: int) -> list[str]:
        r = self.rng.random()
        count = 0 if r < 0.45 else 1 if r < 0.8 else 2
        picked: dict[int, str] = {}
        for _ in range(min(count, max_count)):
            adj = self.choice(ADJECTIVES)
            picked.setdefault(adj.rank, adj.en)
        return [picked[k] for k in sorted(picked)]

    def np(self, nouns: list[_Noun], number: str | None = None, pp_prob: float = 0.0, max_adj: int = 2) -> list[str]:
        number = number or ("sg" if self.rng.random() < 0.55 else "pl")
        noun = self.choice(nouns)
        det = self.choice(["the"] * 6 + (_SG_DETS if number == "sg" else _PL_DETS))
        words = [det] + self.adjectives(max_adj) + [noun.en if number == "sg" else noun.en_pl]
        if self.rng.random() < pp_prob:
            words += [self.choice(_NP_PREPS)] + self.np(_OBJECTS, pp_prob=0.0, max_adj=2)
        return words

    def subject(self, nouns: list[_Noun]) -> tuple[list[str], str]:
        if nouns is _AGENTS and self.rng.random() < 0.12:
            pron = self.choice(list(PRONOUNS))
            return [pron], PRONOUNS[pron][2]
        number = "sg" if self.rng.random() < 0.55 else "pl"
        return self.np(nouns, number, pp_prob=0.35), number

    def time(self, tense: str) -> list[str]:
        r = self.rng.random()
        if r < 0.7:
            return []
        if r < 0.8:
            return ["yesterday"] if tense == "past" else ["today"]
        if r < 0.87 and tense == "present":
            return ["every", "day"]
        words = ["in", self.choice(list(MONTHS))]
        return words + ([self.choice(YEARS)] if self.rng.random() < 0.5 else [])

    def sentence(self) -> list[str]:
        r = self.rng.random()
        tense = "past" if self.rng.random() < 0.35 else "present"
        if r < 0.12:  # passive: "the agreement was signed in august 1992"
            subj, number = self.subject(_THINGS)
            verb = self.choice(_PASSIVE)
            words = subj + ["was" if number == "sg" else "were", verb.participle]
            if self.rng.random() < 0.3:
                words += ["by"] + self.np(_AGENTS, max_adj=1)
            return words + self.time("past") + ["."]
        if r < 0.3:  # copula
            subj, number = self.subject(_OBJECTS if self.rng.random() < 0.5 else _AGENTS)
            be = {("sg", "present"): "is", ("pl", "present"): "are", ("sg", "past"): "was", ("pl", "past"): "were"}
            words = subj + [be[(number, tense)]]
            if self.rng.random() < 0.3:
                where = self.choice(["in", "near", "behind", "under", "on"])
                return words + [where] + self.np(_PLACES, max_adj=1) + ["."]
            if self.rng.random() < 0.2:
                words.append("very")
            return words + [self.choice(ADJECTIVES).en] + self.time(tense) + ["."]
        subj, number = self.subject(_AGENTS)
        if self.rng.random() < 0.4:
            verb = self.choice(_INTRANSITIVE)
            obj: list[str] = []
            if self.rng.random() < 0.25:
                obj = [self.choice(["in", "near", "behind", "under", "on"])] + self.np(_PLACES, max_adj=1)
        else:
            verb = self.choice(_TRANSITIVE)
            obj = self.np(_OBJECTS, pp_prob=0.35)
        if tense == "present" and self.rng.random() < 0.15:
            v_words = ["does" if number == "sg" else "do", "not", verb.base]
        elif tense == "past":
            v_words = [verb.past]
        else:
            v_words = [verb.third if number == "sg" else verb.base]
        return subj + v_words + obj + self.time(tense) + ["."]


def generate_pairs(n: int, seed: int = TRAIN_SEED, max_len: int | None = None,
                   stop: Callable[[], bool] | None = None) -> list[tuple[list[str], list[str]]]:
    """``n`` (source tokens, target tokens) pairs, deterministic for ``seed``.

    With ``max_len``, pairs whose source or target is longer are resampled.
    Source lengths range from 3 to about 25 tokens (median about 9). ``stop()``
    (asked every 1,000 pairs) ends the list early when it returns True.
    """
    gen = _Generator(random.Random(seed))
    out: list[tuple[list[str], list[str]]] = []
    while len(out) < n and not (stop is not None and len(out) % 1000 == 0 and stop()):
        src = gen.sentence()
        for k in range(len(src) - 1):  # a -> an before a vowel ("an old car", but "a european ...")
            if src[k] == "a" and src[k + 1][0] in "aeio":
                src[k] = "an"
        tgt = translate(src)
        if max_len is not None and (len(src) > max_len or len(tgt) > max_len):
            continue
        out.append((src, tgt))
    return out


PRESETS: list[str] = [
    "the agreement on the european economic area was signed in august 1992 .",
    "the red car is fast .",
    "the old wooden table is in the kitchen .",
    "the small girl sees the big white dog .",
    "my french friends bought a new blue car yesterday .",
    "the black cats do not eat the green apples .",
    "the famous singer visited the beautiful old city .",
    "the teachers with the long red books watch the young students in the garden .",
]
