"""The views of the app, declared once: navigation, URL parameters (kind, default, range, label) and what their
models must be able to do.

Everything that needs to know a view reads this: app.py and the home page (navigation), the page controls and the
URL state (explorer.ui.state.Controls: each widget takes its label, default and range from here, and a URL value
outside the range gets a message), lessons (explorer.lessons validates a step's parameters against it) and the
model pickers (the capabilities a view needs, explorer.adapters.capabilities). Adding a view is one
`VIEWS.append(View(...))` line below.

A view is listed here only once its page exists and works. The page scripts live in app_pages/, not pages/: a
folder named pages/ next to app.py puts the first session of a server process in Streamlit's legacy multipage
mode, which answers a view's URL with "Page not found" before app.py's router has run (tests/test_browser.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from explorer.adapters.capabilities import may_have
from explorer.loading.catalogue import series_steps
from explorer.param_kinds import WHAT, parse
from explorer.runtime.paths import app_root

# Kinds: "text", "model", "model or none", "int", "float", "bool", "ints" (comma-separated integers), "choice"
# (one of `choices`; `int` among them accepts any integer) and "choices" (a comma-separated list of them).


@dataclass(frozen=True)
class Param:
    """One piece of view state kept in the URL (?key=): kind, default, bounds or choices, label and help."""

    kind: str
    default: Any = None  # of the kind's type (str, int, float, bool; a tuple for ints, choices): pages read it so
    lo: float | None = None
    hi: float | None = None  # a bound that depends on the model (layers, units, tokens) is given by the page;
    # for "choices": how many may be chosen at most
    step: float | None = None
    choices: tuple = ()
    label: str = ""
    help: str | None = None
    even: bool = False  # an int that must be even (d_model: dimensions come in sin/cos pairs)

    @property
    def lesson_kind(self) -> object:
        """The kind as explorer.lessons checks it: a tuple of choices, a list for several, else the kind name."""
        return tuple(self.choices) if self.kind == "choice" else list(self.choices) if self.kind == "choices" \
            else self.kind

    def parse(self, value: object) -> object:
        """`value` (URL text or a lesson's typed value) as this parameter's kind (explorer.param_kinds.parse); bounds
        are not checked (`validate`)."""
        return parse(self.kind, value, self.choices)

    def validate(self, raw: object, lo: float | None = None, hi: float | None = None,
                 name: str | None = None) -> tuple[float | None, str | None]:
        """`raw` parsed to this int or float parameter and kept in [lo, hi] (default: its declared bounds), with a
        message naming it (`name`, default its label) and saying what was changed (None when nothing was)."""
        lo = self.lo if lo is None else lo
        hi = self.hi if hi is None else hi
        name, default = name or self.label or "value", self.default
        try:
            value = parse(self.kind, raw)
            assert isinstance(value, (int, float))  # an "int" or "float" parameter's value
        except ValueError:
            return default, f"{name} must be {WHAT[self.kind]}; got '{str(raw)[:40]}', using {self._fmt(default)}."
        if lo is not None and value < lo:
            return type(default)(lo), f"{name} must be at least {self._fmt(lo)}; got {self._fmt(value)}, using " \
                                      f"{self._fmt(lo)}."
        if hi is not None and value > hi:
            return type(default)(hi), f"{name} is limited to {self._fmt(hi)} here; got {self._fmt(value)}, using " \
                                      f"{self._fmt(hi)}."
        if self.even and value % 2:
            fixed = value + 1 if hi is None or value + 1 <= hi else value - 1
            return fixed, f"{name} must be even (dimensions come in sin/cos pairs); got {value:,}, using {fixed:,}."
        return type(default)(value), None

    def _fmt(self, x: float) -> str:
        return f"{int(x):,}" if self.kind == "int" else f"{x:g}"


def P(kind: str, default: object = None, lo: float | None = None, hi: float | None = None, label: str = "",
      step: float | None = None, choices: tuple = (), help: str | None = None, even: bool = False) -> Param:
    return Param(kind, default, lo, hi, step, tuple(choices), label, help, even)


def choice(*choices: object, label: str = "", default: object = None, help: str | None = None) -> Param:
    return Param("choice", choices[0] if default is None else default, choices=tuple(choices), label=label, help=help)


@dataclass(frozen=True)
class View:
    script: str  # path of the page script, relative to the repository root
    title: str
    icon: str  # Streamlit material icon
    url_path: str
    summary: str  # one line for the home page
    section: str = "Views"
    params: dict[str, Param] = field(default_factory=dict)
    needs: tuple[str, ...] | None = None  # the capabilities its model must have (explorer.adapters.capabilities):
    # its picker offers the models that may have them
    sentences: str = ""  # the purpose of its sentence (explorer.data.examples.PURPOSES): the model gives the sentences
    main: str = ""  # the key of its main chart, which fits in the first screen of a projector (tests/test_browser.py)
    heavy: bool = False  # a run on a large model takes seconds: its sentence is read on Enter, not while typing
    task: str | None = None  # the Hugging Face head its models are loaded with (loaders.load_model); None: their own

    @property
    def parts(self) -> dict[str, str]:
        """Where this view lives, each part named after its page (app_pages/<name>.py): "page", and those of
        "probe" (explorer/probes/<name>.py: the computation, returning a Trace), "presenter" (explorer/presenters/
        <name>.py: Trace + settings -> Presentation) and "figures" (explorer/viz/<name>.py) that exist, as paths from
        the repository root. The notebook's function for the view is explorer.nb.<name>."""
        name = self.script.removeprefix("app_pages/").removesuffix(".py")
        paths = {"page": self.script, "probe": f"explorer/probes/{name}.py",
                 "presenter": f"explorer/presenters/{name}.py", "figures": f"explorer/viz/{name}.py"}
        return {kind: path for kind, path in paths.items() if (app_root() / path).exists()}


def default_models() -> list[tuple[str, str | None]]:
    """(model id, task) of every view's declared default models: what a class opens, kept loaded by the server."""
    out: list[tuple[str, str | None]] = []
    for view in VIEWS:
        for name in ("model", "models"):
            value = view.params[name].default if name in view.params else None
            ids = value if isinstance(value, (list, tuple)) else [value] if isinstance(value, str) else []
            out += [(m, view.task) for m in ids if m and m != "none" and (m, view.task) not in out]
    return out


TEXT = P("text")
GATES = ("i", "f", "g", "o", "c", "h", "r", "z", "n")
KINDS = ("greedy", "sample", "top-k", "top-p", "typical", "min-p", "beam")
MAX_NEW, MAX_SAMPLES, MAX_BEAMS = 200, 20, 8


def installed_or(packaged: str, fallback: str) -> str:
    """`pretrained:<packaged>` when its package is installed here (explorer.loading.pretrained), else `fallback`, a
    built-in that is always there: the default model of a view that reads a real model best but must open without it."""
    from explorer.loading import pretrained

    return f"pretrained:{packaged}" if pretrained.is_installed(packaged) else fallback


# The decoder views open the packaged SmolLM2-135M-Instruct when it is installed (decided once per process, when this
# module is imported), else the built-in tiny GPT trained on real English (app_pages/decoding_strategies.py falls back
# on builtin:lstm-lm-wordnet when that is not trained either).
LM_DEFAULT = installed_or("smollm2", "builtin:tiny-gpt-wordnet")

# The recurrent language models trained on real English (WordNet 3.0's text: explorer.data.wordnet_english), the
# defaults of the recurrent views; builtin:rnn-lm, gru-lm and lstm-lm (generated English) stay for clean agreement.
RECURRENT_WORDNET = ("builtin:rnn-lm-wordnet", "builtin:gru-lm-wordnet", "builtin:lstm-lm-wordnet")

# The browser tab's icon: a file shipped with the app (a :material/…: icon makes the browser fetch it from a font CDN)
PAGE_ICON = str(app_root() / "assets" / "icon.png")

HOME = View("app_pages/overview.py", "Home", ":material/home:", "overview",
            "What each view shows, the device, the models.", "Explorer")
MODELS = View(
    "app_pages/catalogue.py", "Models", ":material/model_training:", "catalogue",
    "Pick, load or upload a model; see what is loaded, on which device, in which dtype; train a built-in model.",
    "Explorer", {"model": P("model", "pretrained:minilm")},
)

VIEWS: list[View] = [HOME, MODELS]
VIEWS.append(View(
    "app_pages/positional_encodings.py", "Positional encodings", ":material/timeline:", "positional-encodings",
    "Sinusoidal, learned and rotary positions, and why attention needs them.", params={
        "panel": choice("sinusoidal", "similarity", "rope", "learned", "sentence", label="Panel"),
        "model": P("model", "pretrained:minilm"), "text": TEXT,
        "d_model": P("int", 128, 2, 1024, "d_model", 2, help="Even, 2..1024: dimensions come in sin/cos pairs.",
                     even=True),
        "n_pos": P("int", 100, 1, 2048, "positions", help="1..2048"),
        "base": P("float", 10000.0, 2.0, 1e7, "base n", 1000.0,
                  help="ω_i = n^(−2i/d). Vaswani et al. use n = 10000; smaller n gives shorter wavelengths."),
        "pos": P("int", 10, 0, 2047, "position pos"), "dim": P("int", 4, 0, 511, "pair i (dimensions 2i, 2i+1)"),
        "k": P("int", 5, 0, 2047, "offset k"), "sim": choice("dot", "cosine", label="Similarity"),
        "rope_qk": choice("ones", "random", label="q and k",
                          help="ones: q = k = (1,…,1), the long-term decay of Su et al.; random: a seeded pair."),
        "seed": P("int", 0, 0, 10_000, "seed"), "pca": choice(2, 3, label="PCA"), "tok": P("int", 0, 0, None, "token"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its learned position table on "
                          "one colour scale with the first, and B − A where the two tables have the same shape."),
    }, needs=("positions",), sentences="order", main="pe_heatmap"))
VIEWS.append(View(
    "app_pages/lstm_gates.py", "Recurrent cell", ":material/memory:", "lstm-gates",
    "LSTM/GRU/Elman gates, cell and hidden states for your sentence, unit by unit.", params={
        "model": P("model", "builtin:lstm-lm-wordnet"), "text": TEXT, "layer": P("int", 0, 0, None, "Layer"),
        "dir": choice("forward", "backward", label="Direction"), "gate": choice(*GATES, label="State", default="c"),
        "sort": choice("variance", "mean", "saturation", "index", label="Sort units by"),
        "top": P("int", 64, 1, None, "Show the top-N units"),
        "section": choice("One unit + equations", "Gate saturation", "Next tokens", "Compare two sentences",
                          label="Look at"),
        "unit": P("int", 0, 0, None, "Unit", help="Default: the first unit of the sorted heatmap."),
        "t": P("int", 0, 0, None, "Token"), "pair": P("text", label="Pair"), "a": P("text", label="Sentence A"),
        "b": P("text", label="Sentence B"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: the same sentence read by both, "
                          "side by side on one colour scale, and their difference where the shapes match."),
    }, needs=("recurrence",), sentences="agreement", main="heatmap"))
VIEWS.append(View(
    "app_pages/self_attention.py", "Self-attention", ":material/hub:", "self-attention",
    "Per-head attention maps, rollout, masks and the Q·K/√d softmax arithmetic, live.", params={
        "model": P("model", "pretrained:minilm"), "text": TEXT, "pair": TEXT,
        "mode": choice("head", "model", "steps", "masks", "compare", label="View"),
        "pad": P("int", 3, 0, 16, "Padding tokens appended (attention_mask = 0)"),
        "stream": choice("encoder", "decoder", "cross", label="Attention"),
        "layer": P("int", 0, 0, None, "Layer"), "head": P("int", 0, 0, None, "Head"),
        "heads": P("ints", (), label="Overlay heads", help="Several heads of this layer at once: one colour each in "
                   "the line view, their mean in the heatmap."),
        "token": P("int", -1, -1, None, "Query token", help="Isolates this token's attention (its row)."),
        "hide": P("bool", False, label="Hide special tokens and renormalise rows",
                  help="The model's own special tokens (which ones depends on its tokenizer; padding included)."),
        "agg": choice("heads", "mean", "max", "rollout", label="Aggregation"),
        "text2": P("text", "The animal didn't cross the street because it was too wide.",
                   label="Second sentence to compare"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: the same sentence read by both, "
                          "the chosen head side by side and their difference where the shapes match."),
    }, needs=("attention",), sentences="attention", main="head_heatmap"))
VIEWS.append(View(
    "app_pages/seq2seq.py", "Seq2seq alignment", ":material/translate:", "seq2seq",
    "Bahdanau and Luong attention, HF cross-attention, step-by-step decoding and beam search.", params={
        "model": P("model", "builtin:seq2seq-bahdanau"), "model2": P("model or none", "none", label="Compare with"),
        "text": TEXT, "target": P("text", "", label="Target to force (teacher forcing); leave empty and the model "
                                  "decodes", help="Type a translation: the decoder reads it token by token and the "
                                  "page shows how the model aligns it and its loss."),
        "decoding": choice("greedy", "beam", label="Decoding"), "beam": P("int", 4, 1, MAX_BEAMS, "Beam size"),
        "layer": P("int", 0, 0, None, "Decoder layer"), "head": choice("mean", int, label="Head"),
        "step": P("int", 0, 0, None, "Decoding step t"),
        "allcurves": P("bool", True, label="Also show every built-in model on this corpus"),
        "panel": choice("step", "length", "beam", label="Below the heatmap"),
    }, needs=("alignment",), sentences="translation", main="alignment"))
VIEWS.append(View(
    "app_pages/word_embeddings.py", "Word embeddings", ":material/scatter_plot:", "word-embeddings",
    "PCA, t-SNE and UMAP of a whole vocabulary, neighbours, analogies and contextual embeddings.", params={
        "src": choice("model", "file", label="Vectors from"), "model": P("model", "builtin:word2vec"),
        "table": P("text", "input", label="Table"), "text": TEXT,
        "method": choice("pca", "tsne", "umap", label="Method"), "dims": choice(2, 3, label="Dimensions"),
        "n": P("int", 5000, 1, None, "N entries"), "whole": P(
            "bool", True, label="Whole words only",
            help="Subword vocabularies (the toggle is offered for them): keep only entries that are whole words. "
                 "Byte-level BPE and SentencePiece (SmolLM2, GPT-2, Llama): a word after a space, shown ·king, "
                 "of 2 or more letters and nothing else (a word's first piece such as ·th counts as one; pieces "
                 "inside a word, runs of spaces, punctuation and numbers are out). WordPiece (BERT, MiniLM): "
                 "entries of 2 or more letters without ## (continuation pieces are out). Word vocabularies: 2 or "
                 "more letters. Special tokens never."),
        "nb": P("int", 15, 2, 100, "n_neighbors"),
        "md": P("float", 0.1, 0.0, 0.99, "min_dist", 0.01), "perp": P("float", 30.0, 2.0, 100.0, "perplexity", 1.0),
        "metric": choice("cosine", "euclidean", label="Metric"), "nn": P("text", label="Word"),
        "k": P("int", 10, 1, 50, "How many"), "a": P("text", "king", label="a"), "b": P("text", "man", label="− b"),
        "c": P("text", "woman", label="+ c"), "ka": P("int", 5, 1, 20, "Answers"),
        "x1": P("text", "man", label="x axis from"), "x2": P("text", "woman", label="x axis to"),
        "y1": P("text", "small", label="y axis from"), "y2": P("text", "big", label="y axis to"),
        "layer": P("int", None, 0, None, "Hidden state",
                   help="Which hidden state is labelled: 0 the embeddings (what enters layer 0), k the output of "
                        "layer k − 1 (layers are numbered from 0; the last after the final norm where the model "
                        "applies one). Default: the last."),
        "cfit": choice("all", "layer", label="PCA fitted on"),
        "s1": P("text", "the bank of the river", label="Sentence A",
                help="The default follows the model: an encoder reads both ways (the bank of the river); a causal "
                     "model reads only the words before 'bank', so they come first (He sat down on the grassy "
                     "river bank)."),
        "s2": P("text", "my bank account", label="Sentence B"),
        "dw": P("text", "bank", label="Word"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: under Nearest neighbours, its "
                          "own neighbours of the word beside the first model's, and the first model's neighbours "
                          "read in it (B − A)."),
        "section": choice("neighbours", "analogies", "axes", "contextual", label="Below the projection"),
    }, needs=("tables",), sentences="words", main="projection"))
VIEWS.append(View(
    "app_pages/decoding_strategies.py", "Decoding strategies", ":material/casino:", "decoding-strategies",
    "Greedy, temperature, top-k, top-p, typical, min-p and beam search side by side, with metrics.", params={
        "model": P("model", LM_DEFAULT), "text": TEXT,
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its outputs for the same "
                          "prompt, strategies and seed; at a step, both distributions after the first model's tokens "
                          "and p(B) − p(A)."),
        "chat": P("bool", False, label="Chat template",
                  help="Instruct models: wrap the prompt in the tokenizer's chat template (a user turn after the "
                       "template's system prompt, then the opener of the assistant's turn), as the model was tuned to "
                       "read it, and stop at its end-of-turn token. Off: the raw text is continued."),
        "system": P("text", "", label="System prompt (chat template)",
                    help="At most 1,000 characters. Empty: the template's own default, if it has one."),
        "strategies": P("choices", ("greedy", "top-k", "top-p", "beam"), hi=6, label="Strategies (2 to 6)",
                        choices=KINDS, help="Top-p is nucleus sampling (Holtzman et al. 2020): the smallest set of "
                                            "tokens whose probabilities sum to p."),
        "seed": P("int", 0, 0, 2**31 - 1, "Seed", 1,
                  help="torch.manual_seed(seed) before generating: the same seed gives the same draws."),
        "max_new": P("int", 30, 1, MAX_NEW, "New tokens"),
        "min_new": P("int", 0, 0, MAX_NEW, "At least this many new tokens", help="Every strategy generates at least "
                     "this many tokens before it may end (Hugging Face's min_new_tokens: the end token is masked "
                     "until then). The probabilities shown stay the model's own."),
        "temperature": P("float", 1.0, 0.05, 3.0, "Temperature T", 0.05,
                         help="Sampling strategies divide the logits by T before their filter (0 would be greedy "
                              "decoding: pick Greedy for that)."),
        "n": P("int", 5, 1, MAX_SAMPLES, "Samples per strategy (n)",
               help="For self-BLEU and distinct-n over samples; greedy and beam give one output."),
        "k": P("int", 40, 1, 1000, "Top-k: k"), "p": P("float", 0.9, 0.05, 1.0, "Top-p: p", 0.01),
        "typical": P("float", 0.9, 0.05, 1.0, "Typical-p: mass", 0.01),
        "minp": P("float", 0.1, 0.0, 1.0, "Min-p", 0.01),
        "beam": P("int", 4, 1, MAX_BEAMS, "Beams"),
        "lp": P("float", 1.0, -1.0, 3.0, "Length penalty", 0.1,
                help="Finished beams are ranked by sum log p / generated_length^penalty (Hugging Face's definition)."),
        "rep": P("float", 1.0, 1.0, 2.0, "Repetition penalty", 0.05,
                 help="CTRL (Keskar et al. 2019): logits of tokens already in the text are divided by it (multiplied "
                      "when negative). Applies to every strategy."),
        "ngram": P("int", 0, 0, 5, "No repeat n-gram size (0 = off)"),
        "eos": P("bool", True, label="Stop at end of sequence"), "col": P("int", 0, 0, None, "Column"),
        "unk": P("bool", False, label="Show the unknown-word token",
                 help="A word-level model's unknown-word token stands for every word outside its vocabulary: it is "
                      "left out of the generated text unless this is on (its probability is said under the chart)."),
        "step": P("int", 1, 1, MAX_NEW, "Step", help="The position of the generated token (1 = the first new token)."),
        "view_t": P("float", 1.0, 0.05, 3.0, "Temperature for this view", 0.05,
                    help="Reshapes the distribution live; the strategy's filter is re-applied at this T."),
        "x": choice("self-BLEU", "distinct-2", "distinct-1", "distinct-3", label="x (diversity)"),
        "y": choice("mean log-prob", "perplexity", label="y (quality)"),
        "section": choice("step", "beam", "tradeoff", label="Below the outputs"),
    }, needs=("stepper",), sentences="prompt", main="logprobs",
       heavy=True))
VIEWS.append(View(
    "app_pages/logit_lens.py", "Logit lens", ":material/layers:", "logit-lens",
    "What each layer would predict: every layer's hidden state read through the model's own output layer.", params={
        "model": P("model", LM_DEFAULT), "text": TEXT,
        "layer": P("int", None, 0, None, "Layer", help="Layers count from 0: layer l is block l; its output is read."),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its lens on the same sentence, "
                          "and the probability it gives the first model's prediction minus the first model's."),
        "pos": P("int", None, 0, None, "After token"),
    }, needs=("lens",), sentences="agreement", main="lens_grid"))
VIEWS.append(View(
    "app_pages/token_attribution.py", "Token attribution", ":material/target:", "token-attribution",
    "Which input tokens drive each output token: gradient × input, integrated gradients and LRP, and why this "
    "token rather than another.", params={
        "model": P("model", LM_DEFAULT), "text": TEXT, "target": P("text", label="Target (encoder-decoders)"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its attributions on the same "
                          "sentence, on one colour scale, and B − A where both read the same tokens."),
        "method": choice("integrated gradients", "gradient × input", "LRP", label="Method",
                         help="LRP: layer-wise relevance propagation (AttnLRP rules; for recurrent networks those of "
                              "Arras et al.), one forward and one backward pass, its relevance conserved layer to "
                              "layer up to what biases, position vectors and the softmax absorb."),
        "foil": P("text", "", label="Rather than",
                  help="A contrastive question: attribute f(output) − f(foil) for a word (the token the model "
                       "would write for it), or “second”: each output's most likely other token."),
        "of": choice("log-probability", "logit", label="Attribute the output token's",
                     help="log-probability: log p(token), what the model's prediction is (a change common to every "
                          "logit does not move it); logit: the output layer's raw score for the token."),
        "steps": P("int", 256, 2, 1024, "Gradient evaluations (at most, per output)",
                   help="Integrated gradients: the path from the baseline is cut into 8 intervals, each integrated by "
                        "Simpson's rule (the gradient at its ends and middle), and the intervals whose sum disagrees "
                        "most with the exact change along them are halved until the attributions add up to the whole "
                        "change within 1 %, or an output token has spent this many gradient evaluations."),
        "out": P("int", None, 0, None, "Output token"),
        "outputs": choice("all", "prediction", label="Outputs attributed",
                          help="all: every next token of the sentence and the model's prediction after it (a row "
                               "each); prediction: only the model's own next token. Language models above 50 "
                               "million parameters open on the prediction alone: every row costs tens of forward "
                               "and backward passes."),
    }, needs=("gradient",), sentences="agreement",
       main="attr_heatmap", heavy=True))
VIEWS.append(View(
    "app_pages/gradients_through_time.py", "Gradients through time", ":material/trending_down:",
    "gradients-through-time",
    "How far back a recurrent model's prediction reaches: the gradient at each word, model against model.", params={
        "models": P("choices", RECURRENT_WORDNET, label="Recurrent models",
                    choices=RECURRENT_WORDNET + ("builtin:rnn-lm", "builtin:gru-lm", "builtin:lstm-lm")
                    + tuple(f"builtin:lstm-lm@{step}" for step in series_steps("builtin:lstm-lm")[:-1])),
        "text": TEXT,
    }, needs=("recurrence",), sentences="distance", main="gradients"))
VIEWS.append(View(
    "app_pages/masked_words.py", "Masked words", ":material/text_select_start:", "masked-words",
    "BERT's pre-training task: the words a masked language model puts at [MASK], two sentences side by side.",
    params={
        "model": P("model", "pretrained:minilm-mlm"), "text": TEXT,
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model: its fillers of the same masks on one scale with the first's, and "
                          "p(B) − p(A) of the first model's top tokens where both read the same tokens."),
        "mask": P("int", -1, -1, None, "Mask a word", help="Replace this word of the sentence by [MASK] (the [MASK]s "
                  "typed in the sentence stay)."),
        "words": P("text", "is, are", label="Compare words", help="Comma-separated: each word's probability and rank "
                   "at every [MASK]."),
        "k": P("int", 10, 1, 30, "Top-k fillers"),
        "b": P("text", "the key to the cabinets [MASK] on the table .",
               label="Second sentence, side by side (empty: none)"),
    }, needs=("fill_in",), sentences="masked", main="fill-A-0", task="masked-lm"))
VIEWS.append(View(
    "app_pages/interventions.py", "Interventions", ":material/healing:", "interventions",
    "Patch, ablate and trace where a model computes its answer: activation and attribution patching.", params={
        "model": P("model", LM_DEFAULT), "text": P("text", label="Clean prompt"),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its grid of the same site, "
                          "direction and method on the first grid's scale, and the difference of the two grids."),
        "corrupt": P("text", label="Corrupted prompt", help="As many tokens as the clean prompt: patching takes each "
                     "activation from one run into the other at the same position."),
        "answer": P("text", label="Answer", help="The clean prompt's continuation, read as the next word after it "
                    "(its first token); for a classifier or tagger, one of its labels (name or number)."),
        "wrong": P("text", label="Wrong", help="The corrupted prompt's continuation (its first token), or label."),
        "site": choice("resid", "attn", "mlp", "heads", "h", "c", label="Patch"),
        "direction": choice("denoise", "noise", label="Direction",
                            help="denoise: the corrupted run with one clean activation (what restores the answer); "
                                 "noise: the clean run with one corrupted activation (what the answer needs)."),
        "method": choice("exact", "attribution", "both", label="Method",
                         help="exact: one patched run per cell; attribution: the first-order estimate from one "
                              "forward and one backward pass per prompt (Nanda 2023); both: side by side."),
        "pos": P("int", -1, -1, None, "Heads: position", help="-1: each head patched at every position."),
        "dir": choice("fwd", "bwd", label="Direction of the recurrence"),
        "layer": P("int", None, 0, None, "Layer"), "col": P("int", None, 0, None, "Column"),
        "range": choice("1", "fit", label="Colour range",
                        help="1: the colours run from −1 to 1 (a restored fraction); fit: from −m to m, m the grid's "
                             "largest |value| (small effects show)."),
        "ablate": P("text", "", label="Ablate", help="Heads (L3H2), MLP layers (L3MLP), attention layers (L3ATTN) "
                    "or recurrent units (L0U12), comma-separated."),
        "how": choice("zero", "mean", "resample", label="Ablation",
                      help="zero: the output set to 0; mean: to its mean over the positions of both prompts; "
                           "resample: to its value in the corrupted prompt."),
    }, needs=("patching",), sentences="contrast", main="patch_grid", heavy=True))
VIEWS.append(View(
    "app_pages/decision.py", "Decision", ":material/rule:", "decision",
    "What a classifier or tagger decides: its labels for two sentences, the decision word by word, and which words "
    "it comes from.", params={
        "model": P("model", "builtin:sentiment-lstm"), "text": TEXT,
        "b": P("text", "The film was not good at all.", label="Second sentence, side by side (empty: none)"),
        "pair": P("text", "", label="Second segment (sentence-pair classifiers)",
                  help="A sentence-pair classifier (entailment, paraphrase) reads two segments: [CLS] A [SEP] B "
                       "[SEP]."),
        "compare": P("model or none", "none", label="Compare with",
                     help="A second model, or another step of this model's training: its own labels for the same "
                          "sentence."),
        "label": P("int", -1, -1, 4095, "Label explained", help="-1: the label the model chose."),
        "foil": P("int", -1, -1, 4095, "Rather than",
                  help="A contrastive question: attribute log p(label) − log p(this label)."),
        "method": choice("integrated gradients", "gradient × input", "LRP", label="Method"),
        "steps": P("int", 256, 2, 1024, "Gradient evaluations (at most)",
                   help="Integrated gradients by the adaptive Simpson rule of the token-attribution view, until the "
                        "attributions add up to the whole change within 1 %."),
        "token": P("int", None, 0, None, "Word whose label is explained", help="A tagger: the word's label."),
    }, needs=("decision",), sentences="decide", main="decision_main"))
TRAINING = View(
    "app_pages/training_curves.py", "Watch it learn", ":material/show_chart:", "training-curves",
    "What a model learned, when: held-out loss, agreement, its number unit, embedding neighbours and attention heads "
    "at each snapshot of its training; a click opens a view at that step.", params={
        "model": P("model", "builtin:lstm-lm"),
        "score": choice("previous-token", "induction", label="Head score",
                        help="previous-token: the mean attention weight from each position to the one before it on "
                             "held-out sentences; induction: from each token of a repeated random sequence to the "
                             "token after its first occurrence (Olsson et al. 2022)."),
    }, needs=("lens",), main="curves")
VIEWS.append(TRAINING)
VIEWS.append(View("app_pages/lesson_plans.py", "Lessons", ":material/school:", "lesson-plans",
                  "Step-by-step lessons for class: each step opens a view in a given state, with what to notice and a "
                  "question.", "Explorer"))

# A model trained with snapshots (builtin:lstm-lm, builtin:tiny-gpt: explorer.loading.catalogue.series_steps) is shown
# at a step of its training in every view that reads one trained model (explorer/ui/training_steps.py).
TRAIN_STEP = P("int", None, 0, None, "Training step",
               help="The optimiser step whose snapshot of the model the view reads (a model trained with snapshots); "
                    "the last step is the trained checkpoint.")
for _view in VIEWS:
    if _view not in (HOME, MODELS, TRAINING) and "model" in _view.params and _view.params["model"].kind == "model":
        _view.params["train_step"] = TRAIN_STEP


def views_for(family: str, series: bool = False) -> list[View]:
    """The views that open a model of `family` (explorer.loading.catalogue.FAMILIES) from its id (?model=), in VIEWS
    order: each view that reads one model and needs only what the family's models may have (the models its picker
    offers: explorer.adapters.capabilities.MAY_HAVE), but Watch it learn (TRAINING) only for a model trained with
    snapshots (`series`), whatever its family: it reads those, and offers every model that has them."""
    reads_one = [v for v in VIEWS if v.needs is not None and "model" in v.params and v.params["model"].kind == "model"]
    return [v for v in reads_one if (series if v is TRAINING else may_have(family, v.needs))]


BY_PATH: dict[str, View] = {v.url_path: v for v in VIEWS}
# What explorer.lessons checks: the parameters of each view that has any, and the capabilities its model needs.
PARAMS: dict[str, dict[str, object]] = {v.url_path: {k: p.lesson_kind for k, p in v.params.items()}
                                        for v in VIEWS if v.params or v is HOME}
MODEL_NEEDS: dict[str, tuple[str, ...] | None] = {v.url_path: v.needs for v in VIEWS if v.params}
