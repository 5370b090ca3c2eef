"""The views in a notebook (Jupyter, VS Code, Colab): one function per view, with the view's own parameter names,
over the same probes and figures as the app, and no Streamlit.

    from explorer import nb
    r = nb.self_attention("builtin:tiny-gpt", "the keys to the cabinet are", layer=1, head=2)
    r                      # the view's figures, inline (Plotly)
    r.figures["head_heatmap"], r.trace.attentions   # a figure; the numbers behind it (the probe's trace)

`model` is a catalogue id ("builtin:lstm-lm", "pretrained:smollm2", "builtin:tiny-gpt@98") or an object in memory:
a Hugging Face model (with `tokenizer=`), or a student's `nn.Module` (an nn.LSTM / nn.GRU / nn.RNN language model,
with its vocabulary as `vocab=`: a list of words in id order or a dict word -> id). An object is read by the
mechanisms that read uploads (`read`), and the result's `notes` say what was inferred.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, Generic, ParamSpec, Sequence, TypeAlias, TypedDict, TypeGuard,
                    TypeVar, Unpack)

import plotly.graph_objects as go
import torch

from explorer.runtime.errors import ViewError
from explorer.views import BY_PATH
from explorer.viz.theme import Theme, get_theme


def _view(path: str, key: str) -> Any:
    """The default the view `path` declares for its parameter `key`: a notebook function's default is the page's
    (tests/test_notebook.py compares every one)."""
    return BY_PATH[path].params[key].default


def _view_hi(path: str, key: str) -> float:
    """The largest value the view `path` allows for `key`."""
    hi = BY_PATH[path].params[key].hi
    assert hi is not None  # asked only of bounded parameters
    return hi

if TYPE_CHECKING:
    from explorer.loading.loaders import LoadedModel
    from explorer.loading.model_cache import ModelCache
    from explorer.probes.decision import DecisionTrace
    from explorer.probes.decoding_strategies import DecodingRun
    from explorer.probes.gradients_through_time import GradientTrace
    from explorer.probes.interventions import PatchGrid
    from explorer.probes.logit_lens import LensTrace
    from explorer.probes.lstm_gates import GateTrace
    from explorer.probes.masked_words import MaskedTrace
    from explorer.probes.position_formulas import SinusoidalTrace
    from explorer.probes.positional_encodings import LearnedTrace, SentenceTrace
    from explorer.presenters.presentation import Presentation
    from explorer.probes.self_attention import AttentionTrace
    from explorer.probes.seq2seq import AlignmentTrace
    from explorer.probes.token_attribution import AttributionTrace
    from explorer.probes.word_embeddings import EmbeddingTable
    from explorer.runtime.hf_runtime import PreTrainedModel
    from explorer.training.curves import SeriesCurves

__all__ = ["ViewResult", "NotebookError", "read", "lstm_gates", "self_attention", "positional_encodings",
           "word_embeddings", "decoding_strategies", "logit_lens", "token_attribution", "gradients_through_time",
           "masked_words", "interventions", "seq2seq", "training_curves", "classify", "tag"]


class NotebookError(ViewError, ValueError):
    """What a view says instead of a chart (str(): the message)."""


# What a view reads as `model`: a catalogue id, a LoadedModel, or a module in memory (Hugging Face or a student's).
Model: TypeAlias = "str | LoadedModel | torch.nn.Module"
Row = dict[str, str | int | float]  # one row of a view's table
TraceT = TypeVar("TraceT")
P = ParamSpec("P")
R = TypeVar("R")


class ReadArgs(TypedDict, total=False):
    """The keyword arguments of `read` a view passes on."""

    tokenizer: object
    vocab: Sequence[str] | dict[str, int] | None
    labels: Sequence[str] | None
    device: str
    dtype: str
    task: str | None


@dataclass
class ViewResult(Generic[TraceT]):
    """A view's answer: `figures` (name -> Plotly figure, in the view's order), `trace` (the probe's record: the
    numbers the figures draw), `notes` (what the view says about its input or about what it inferred)."""

    view: str
    model_id: str
    figures: dict[str, go.Figure]
    trace: TraceT
    notes: tuple[str, ...] = ()
    tables: dict[str, list[Row]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> go.Figure:
        return self.figures[name]

    def show(self) -> None:
        """Draw every figure (Plotly's own renderer: inline in Jupyter, VS Code and Colab)."""
        for fig in self.figures.values():
            fig.show()

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        head = f"**{self.view}** · {self.model_id}" + "".join(f"\n\n- {n}" for n in self.notes)
        display(Markdown(head))
        for fig in self.figures.values():
            display(fig)
        for name, rows in self.tables.items():
            import pandas as pd

            display(Markdown(f"*{name}*"), pd.DataFrame(rows))

    def _repr_html_(self) -> str:  # where IPython's display protocol is not used (e.g. an HTML export)
        import html

        parts = [f"<p><b>{html.escape(self.view)}</b> · {html.escape(self.model_id)}</p>"]
        parts += [f"<p>{html.escape(n)}</p>" for n in self.notes]
        parts += [fig.to_html(full_html=False, include_plotlyjs="require") for fig in self.figures.values()]
        return "\n".join(parts)


# ------------------------------------------------------------------------------------------------ models
_CACHE: ModelCache | None = None  # the app's own bounded model cache (explorer.loading.model_cache), made on first use


def _models() -> ModelCache:
    global _CACHE
    if _CACHE is None:
        from explorer.loading.model_cache import ModelCache

        _CACHE = ModelCache()
    return _CACHE


def read(model: Model, tokenizer: object = None, vocab: Sequence[str] | dict[str, int] | None = None,
         device: str = "cpu", dtype: str = "float32", task: str | None = None,
         labels: Sequence[str] | None = None) -> LoadedModel:
    """The explorer's LoadedModel of `model`: a catalogue id (loaded once per process), a LoadedModel, a Hugging Face
    model in memory (`tokenizer`: its tokenizer; attention switched to eager so that its weights can be read), or any
    other nn.Module, read from its state dict as an uploaded checkpoint is (its recurrent layers inferred from the
    weights' names and shapes; `vocab`: its words; a classifier's or tagger's pooling read off its own forward;
    `labels`: the names of its labels). Raises NotebookError. A Hugging Face model read here stays switched to eager
    attention and eval mode; the views (nb.self_attention, ...) given the model itself put it back as it was."""
    from explorer.files.safe_load import ModelLoadError
    from explorer.loading.catalogue import as_trained
    from explorer.loading.loaders import LoadedModel

    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, str):
        try:
            return _models().get(as_trained(model), device, dtype, task)  # the last step: the checkpoint
        except ModelLoadError as exc:
            raise NotebookError(str(exc)) from None
    if not isinstance(model, torch.nn.Module):
        raise NotebookError(f"A model is a catalogue id, a Hugging Face model or an nn.Module; got "
                            f"{type(model).__name__}.")
    if _is_hugging_face(model):
        return _hugging_face(model, tokenizer, dtype)
    return _module(model, vocab, device, dtype, labels)


def _is_hugging_face(model: torch.nn.Module) -> TypeGuard[PreTrainedModel]:
    """Whether `model` is a Hugging Face model: it has a config with a model type (read by duck typing, so that
    transformers is not imported here)."""
    return hasattr(model, "config") and bool(getattr(model.config, "model_type", None))


def _digest(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode() + str(tuple(t.shape)).encode())
        h.update(t.detach().float().cpu().numpy().tobytes()[:4096])
    return h.hexdigest()[:12]


def _hugging_face(model: PreTrainedModel, tokenizer: object, dtype: str) -> LoadedModel:
    from explorer.loading.loaders import LoadedModel, _hf_family

    config = model.config
    name = type(model).__name__
    family = _hf_family(config)
    task = ("masked-lm" if name.endswith("ForMaskedLM") else "sequence-classification"
            if name.endswith("ForSequenceClassification") else "token-classification"
            if name.endswith("ForTokenClassification") else "seq2seq-lm" if family == "encoder-decoder" else
            "causal-lm" if family == "decoder" else "base")
    notes = [f"Read as a Hugging Face {family} ({name}, model_type {config.model_type}), task {task}."]
    if getattr(config, "_attn_implementation", "eager") != "eager":
        try:
            model.set_attn_implementation("eager")
            notes.append("Its attention was switched to eager, so that the attention weights can be read.")
        except Exception as exc:  # an architecture without eager attention: the attention views will say so
            notes.append(f"Its attention could not be switched to eager ({type(exc).__name__}).")
    if tokenizer is None:
        notes.append("No tokenizer was given (tokenizer=...): the views cannot read text with this model.")
    device = str(next(model.parameters()).device)
    meta = {"source": "hf", "task": task, "model_type": getattr(config, "model_type", "")}
    return LoadedModel(f"memory:{name}-{_digest(model)}", family, model.eval(), device, dtype, meta,
                       tokenizer=tokenizer, notes=notes)


def _module(model: torch.nn.Module, vocab: Sequence[str] | dict[str, int] | None, device: str,
            dtype: str, labels: Sequence[str] | None = None) -> LoadedModel:
    from safetensors.torch import save

    from explorer.files.safe_load import ModelLoadError, read_weights
    from explorer.loading.loaders import _materialise
    from explorer.loading.uploads import bundle_from_parts

    state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
    label = f"memory:{type(model).__name__}-{_digest(model)}"
    files: dict[str, bytes] = {}
    if vocab is not None:
        words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])] if isinstance(vocab, dict) else list(vocab)
        files["vocab.json"] = json.dumps(words).encode()
    if labels is not None:
        files["task.json"] = json.dumps({"labels": [str(x) for x in labels]}).encode()
    try:
        weights = read_weights(save(state), "model.safetensors")
        loaded = _materialise(bundle_from_parts(label, type(model).__name__, weights, files), device, dtype)
        if loaded.caps.decision is not None:  # a classifier or tagger: how it pools, read off its own forward
            loaded = _as_its_forward(model, loaded, lambda task: _materialise(bundle_from_parts(
                label, type(model).__name__, weights, {**files, "task.json": json.dumps(task).encode()}), device,
                dtype), labels)
    except ModelLoadError as exc:
        raise NotebookError(str(exc)) from None
    loaded.notes.insert(0, f"Read from the state dict of {type(model).__name__} ({len(state)} tensors), as an "
                           "uploaded checkpoint is: " + ("its vocabulary given." if vocab is not None else
                                                        "no vocabulary given (vocab=...), so no text can be read."))
    return loaded


def _as_its_forward(model: torch.nn.Module, first: LoadedModel, build: Callable[[dict[str, object]], LoadedModel],
                    labels: Sequence[str] | None) -> LoadedModel:
    """The reading of a recurrent classifier or tagger whose head's logits equal `model`'s own forward (to 1e-5 on
    two inputs): each task and pooling of explorer.adapters.decision in turn; `first` with a note when none does."""
    from explorer.adapters.task_head import TASKS
    from explorer.models.rnn_classifier import POOLINGS

    decision = first.caps.decision
    assert decision is not None
    V = len(first.vocabs["vocab"])  # a recurrent network is read only with its vocabulary
    g = torch.Generator().manual_seed(0)
    probes = [torch.randint(0, V, (1, n), generator=g).to(decision.device) for n in (5, 9)]
    try:
        with torch.no_grad():
            theirs = [model.eval()(ids) for ids in probes]
    except Exception as exc:
        first.notes.append(f"Its forward could not be called on token ids ({type(exc).__name__}), so how it pools "
                           "its states was not checked: " + " ".join(decision.head.assumed))
        return first
    theirs = [t[0] if isinstance(t, (tuple, list)) else t for t in theirs]
    named = {"labels": list(labels)} if labels is not None else {}
    for task, pooling in [(TASKS[0], p) for p in POOLINGS] + [(TASKS[1], "")]:
        loaded = build({"task": task, **({"pooling": pooling} if pooling else {}), **named})
        d = loaded.caps.decision
        if d is None:
            continue
        with torch.no_grad():
            ours = [d.decision_logits(d.embed_ids(ids)) for ids in probes]
        if all(isinstance(t, torch.Tensor) and t.shape == o.shape and torch.allclose(t.float(), o.float(), atol=1e-5)
               for t, o in zip(theirs, ours)):
            how = "a word tagger" if task == TASKS[1] else f"a sentence classifier pooling its states by '{pooling}'"
            loaded.notes.append(f"Read as {how}: the only reading of its weights whose logits equal its own forward "
                                "(to 1e-5 on two inputs).")
            return loaded
    first.notes.append("Its forward matches no reading of its weights (last, mean, max or first state; a tag per "
                       "word): the decision shown is the default reading's, not necessarily its own.")
    return first


def _run(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    try:
        return fn(*args, **kwargs)
    except ViewError as exc:
        raise NotebookError(str(exc)) from None


def _as_it_was(fn: Callable[P, R]) -> Callable[P, R]:
    """A view of the notebook leaves the caller's models as they were: a Hugging Face model's attention
    implementation (switched to eager for the call, so that its weights can be read), every model's train/eval
    mode and its parameters' requires_grad, put back when the call returns or raises."""
    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        given = [*args, *kwargs.values()]
        modules = [m for a in given for m in (a if isinstance(a, (list, tuple)) else (a,))
                   if isinstance(m, torch.nn.Module)]
        kept = [(m, m.training, getattr(getattr(m, "config", None), "_attn_implementation", None),
                 [(p, p.requires_grad) for p in m.parameters()]) for m in modules]
        try:
            return fn(*args, **kwargs)
        finally:
            for m, training, attention, grads in kept:
                m.train(training)
                for p, wanted in grads:
                    p.requires_grad_(wanted)
                now = getattr(getattr(m, "config", None), "_attn_implementation", None)
                if attention is not None and now != attention:
                    m.set_attn_implementation(attention)  # type: ignore[operator]  # a Hugging Face model's
    return call


def _theme(projector: bool) -> Theme:
    return get_theme(projector)


def _notes(loaded: LoadedModel, *more: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*getattr(loaded, "notes", []), *(n for m in more for n in m)]))


# ------------------------------------------------------------------------------------------------ views
@_as_it_was
def lstm_gates(model: Model, text: str, gate: str | None = None, layer: int = 0, direction: int = 0,
               sort: str = "variance", top: int = 64, unit: int | None = None, projector: bool = False,
               **read_args: Unpack[ReadArgs]) -> ViewResult[GateTrace]:
    """Inside the recurrent cell: figures "heatmap" (token × unit, state `gate`, the `top` units by `sort`) and
    "unit_lines" (every state of `unit`, default the first unit shown). trace: explorer.probes.lstm_gates.GateTrace."""
    from explorer.probes import lstm_gates as P
    from explorer.viz import lstm_gates as V

    loaded = read(model, **read_args)
    trace = _run(P.rnn_gates, loaded, text)
    if gate is None:  # the page's choice: the cell state where the cell has one (an LSTM), else the hidden state
        gate = _view("lstm-gates", "gate") if _view("lstm-gates", "gate") in trace.gates else "h"
    if gate not in trace.gates:
        raise NotebookError(f"{loaded.id} has no state {gate!r}; it has {', '.join(trace.names)}.")
    units = P.unit_order(trace.gates[gate][layer, direction], sort, top)
    theme = _theme(projector)
    unit = int(units[0]) if unit is None else int(unit)
    return ViewResult("lstm-gates", loaded.id, {
        "heatmap": V.gate_heatmap(trace, gate, layer, direction, units, theme),
        "unit_lines": V.unit_lines(trace, layer, direction, unit, theme)}, trace, _notes(loaded, trace.notes),
        {"what was read from the model": [{"what": what, "value": value} for what, value in trace.inferred]})


@_as_it_was
def self_attention(model: Model, text: str, layer: int = 0, head: int = 0, how: str = "heads", pair: str = "",
                   stream: str = "", mode: str = _view("self-attention", "mode"), heads: Sequence[int] = (),
                   token: int | None = None, hide: bool = False, text2: str = _view("self-attention", "text2"),
                   pad: int = _view("self-attention", "pad"), compare: Model | None = None, projector: bool = False,
                   **read_args: Unpack[ReadArgs]) -> ViewResult[AttentionTrace]:
    """Self-attention, as the page draws it for `mode`: "head" (figures "head_heatmap": layer `layer`, head `head`,
    how="mean"/"max"/"rollout" over heads, and "line_view"), "model" ("model_view": every layer × head, and
    "head_heatmap"), "steps" (the Q·K/√d arithmetic of query `token`: "steps_bars", tables "steps" and "rope"),
    "masks" ("mask", "masked_heatmap"; `pad` padding tokens) or "compare" (the same word in `text2`: "compare_bars",
    "compare_a", "compare_b"). heads: more heads averaged with `head`; token: the query token (None: the page's, "it"
    or the last word; -1: all); hide: special tokens hidden, rows renormalised; compare: a second model beside the
    first ("head_heatmap_b", "head_heatmap_diff"). trace: explorer.probes.self_attention.AttentionTrace (attentions:
    L, H, T, T)."""
    from explorer.presenters import self_attention as V
    from explorer.probes import self_attention as P

    loaded = read(model, **read_args)
    masks = mode == "masks" and loaded.tokenizer is not None and loaded.caps.alignment is None  # as the page pads
    trace = _run(P.attention_trace, loaded, text, pair, stream, pad if masks else 0, arithmetic=mode == "steps")
    L, H = trace.attentions.shape[:2]
    if not (0 <= layer < L and 0 <= head < H):
        raise NotebookError(f"{loaded.id} has {L} layers × {H} heads; got layer {layer}, head {head}.")
    if token is None:
        token = P.default_query(trace.tokens, trace.special) if trace.tokens else -1
    notes: list[str] = []
    other = None
    if compare is not None and mode in ("head", "model") and trace.tokens:
        b = read(compare, **read_args)
        try:
            other = P.attention_trace(b, text, pair, stream, 0, arithmetic=False)
        except P.AttentionError as exc:
            notes.append(f"{b.id} cannot be compared here: {exc}")
    second = _run(P.attention_trace, loaded, text2, "", stream, 0) if mode == "compare" and trace.tokens else None
    shown = V.present(trace, mode, layer, [head, *(h for h in heads if h != head)], how, token, hide,
                      _theme(projector), other, second)
    return _result("self-attention", loaded, shown, trace, notes)


def _result(view: str, loaded: LoadedModel, shown: Presentation, trace: TraceT,
            *more: Sequence[str]) -> ViewResult[TraceT]:
    """A presenter's answer as the notebook returns it: its figures, its tables as rows, and every sentence it
    says (after what was inferred about the model)."""
    tables = {name: [dict(zip(t.data, values)) for values in zip(*t.data.values())]
              for name, t in shown.tables.items()}
    return ViewResult(view, loaded.id, {name: panel.figure for name, panel in shown.figures.items()}, trace,
                      _notes(loaded, *more, shown.texts()), tables)


@_as_it_was
def positional_encodings(model: Model | None = None, n: int = _view("positional-encodings", "n_pos"),
                         d: int = _view("positional-encodings", "d_model"),
                         base: float = _view("positional-encodings", "base"),
                         text: str = "", seed: int = 0, projector: bool = False,
                         **read_args: Unpack[ReadArgs]) -> ViewResult[SinusoidalTrace | LearnedTrace | SentenceTrace]:
    """Positional encodings: with a model, its own learned position table ("table": position × dimension, "pca":
    the positions on the table's principal axes; trace: LearnedTrace), or with `text` the page's sentence panel
    ("sentence": each token's embedding, position vector and their sum, token × dimension; trace: SentenceTrace; the
    notes say what shuffling the words under `seed` does to layer 0's attention); without a model, the sinusoidal
    formula of Vaswani et al. for n positions × d dimensions ("table"; trace: SinusoidalTrace)."""
    from explorer.adapters.base import Unsupported
    from explorer.viz import positional_encodings as V

    theme = _theme(projector)
    if model is None:
        from explorer.probes.position_formulas import sinusoidal

        st = sinusoidal(int(n), int(d), float(base))
        return ViewResult("positional-encodings", "formula", {
            "table": V.pe_heatmap(st.pe, theme, f"Sinusoidal encoding: {n} positions × {d} dimensions")}, st,
            ("An illustration of the formula, not a model's table.",))
    from explorer.probes import positional_encodings as P

    loaded = read(model, **read_args)
    if text:
        try:
            sv = _run(P.sentence_vectors, loaded, text)
            shuffled = _run(P.permutation_experiment, loaded, text, seed) if sv.tokens else None
        except Unsupported as exc:
            raise NotebookError(str(exc)) from None
        figures = {"sentence": V.sentence_vectors(sv.tokens, sv.token, sv.position, sv.total, theme)} \
            if sv.tokens else {}
        return ViewResult("positional-encodings", loaded.id, figures, sv,
                          _notes(loaded, sv.notes, [sv.note] if sv.note else [], shuffled.notes if shuffled else []))
    try:
        lt = P.learned_positions(loaded)
    except Unsupported as exc:
        raise NotebookError(str(exc)) from None
    la = P.analyse_table(lt.weight)
    return ViewResult("positional-encodings", loaded.id, {
        "table": V.pe_heatmap(lt.weight, theme, f"{lt.source}: position × dimension"),
        "pca": V.pca_positions(la.coords, la.explained, theme)}, lt, _notes(loaded))


@_as_it_was
def word_embeddings(model: Model, words: str = "", method: str = "pca", n: int = _view("word-embeddings", "n"),
                    dims: int = 2,
                    nn: str | None = None, k: int = 10, source: str = "input", projector: bool = False,
                    **read_args: Unpack[ReadArgs]) -> ViewResult[EmbeddingTable]:
    """Word embeddings: figure "projection" (the first n entries of the model's embedding table by PCA, t-SNE or UMAP,
    the typed `words` marked) and table "neighbours" (the k nearest entries of `nn` by cosine). trace: the
    EmbeddingTable."""
    from explorer.probes import word_embeddings as P
    from explorer.projections import reduce as PR
    from explorer.viz import word_embeddings as V

    loaded = read(model, **read_args)
    table = _run(P.embedding_table, loaded, source)
    rows = P.background_rows(table, int(n))
    proj = _run(PR.fit, table.vectors[rows], method, int(dims))
    found, notes = P.highlighted(table, words, loaded)
    _, fitted, classes, has_classes = P.fitted_rows(table, proj, rows)
    fig = V.projection_background(fitted, classes, proj.coords, _theme(projector),
                                  title=f"{PR.METHODS[method]} of the first {len(rows):,} entries of {table.source}",
                                  colour_by_class=has_classes, ranks=P.ranks(table, rows),
                                  rank_label=table.rank_label)
    placed = P.place(table, proj, rows, found)
    fig.add_traces(V.typed_overlay(V.points(placed), int(dims), _theme(projector)).data)
    tables = {}
    if nn:
        loc = P.locate(table, nn, loaded)
        if loc.row is None:
            notes.append(P.not_found_message([loc], table))
        else:
            ranked = P.neighbours(table, loc.row, int(k))
            tables["neighbours"] = V.ranked_rows(ranked.words, ranked.cos)
    return ViewResult("word-embeddings", loaded.id, {"projection": fig}, table, _notes(loaded, table.notes, notes),
                      tables)


@_as_it_was
def decoding_strategies(model: Model, prompt: str, strategies: Sequence[str] = ("greedy", "top-k", "top-p", "beam"),
                        seed: int = 0, max_new: int = 30, n: int = _view("decoding-strategies", "n"),
                        eos: bool = True, chat: bool = False, system: str = "", temperature: float = 1.0,
                        k: int = _view("decoding-strategies", "k"), p: float = 0.9, typical: float = 0.9,
                        minp: float = _view("decoding-strategies", "minp"), beam: int = 4, lp: float = 1.0,
                        rep: float = 1.0,
                        ngram: int = 0, min_new: int = 0, unk: bool = False, projector: bool = False,
                        **read_args: Unpack[ReadArgs]) -> ViewResult[DecodingRun]:
    """Decoding strategies side by side, with Hugging Face's own logits processors: figure "logprobs" (the model's
    log-probability of each generated token, one line per strategy); table "outputs" (each strategy's text).
    trace: explorer.probes.decoding_strategies.DecodingRun."""
    from explorer.adapters.generation import LABELS, Strategy
    from explorer.probes import decoding_strategies as D
    from explorer.viz import decoding_strategies as V

    loaded = read(model, **read_args)
    unknown = [s for s in strategies if s not in LABELS]
    if unknown:
        raise NotebookError(f"Unknown strategies {', '.join(unknown)}: use {', '.join(LABELS)}.")
    chosen = tuple(Strategy(kind, temperature=temperature, top_k=k, top_p=p, typical_p=typical, min_p=minp,
                            num_beams=beam, length_penalty=lp, repetition_penalty=rep, no_repeat_ngram_size=ngram,
                            min_new_tokens=min_new, show_unknown=unk) for kind in strategies)
    run = _run(D.decode_all, loaded, prompt, chosen, seed, max_new, n, eos, chat, system)
    left = D.unknown_note(loaded, run.generations)  # the page's note: <unk> left out, its probability
    fig = V.logprob_lines([LABELS.get(g.strategy.kind, "") for g in run.generations],
                          [g.outputs[0].logprobs for g in run.generations], _theme(projector), run.prompt_text,
                          reply=run.chat, source=run.is_encoder_decoder)
    outputs: list[Row] = [{"strategy": g.strategy.label, "output": o.text} for g in run.generations for o in g.outputs]
    return ViewResult("decoding-strategies", loaded.id, {"logprobs": fig}, run,
                      _notes(loaded, (*run.notes, *([left] if left else []))), {"outputs": outputs})


@_as_it_was
def logit_lens(model: Model, text: str, projector: bool = False,
               **read_args: Unpack[ReadArgs]) -> ViewResult[LensTrace]:
    """The logit lens: figure "lens_grid" (each layer's top next token and its probability at each position, through
    the model's own final norm and output layer). trace: explorer.probes.logit_lens.LensTrace."""
    from explorer.probes.logit_lens import logit_lens as lens
    from explorer.viz import logit_lens as V

    loaded = read(model, **read_args)
    trace = _run(lens, loaded, text)
    return ViewResult("logit-lens", loaded.id, {"lens_grid": V.lens_grid(trace, _theme(projector))}, trace,
                      _notes(loaded, trace.notes))


@_as_it_was
def token_attribution(model: Model, text: str, method: str = "integrated gradients",
                      steps: int = _view("token-attribution", "steps"),
                      target: str = "", outputs: str | None = None, of: str = "log-probability",
                      projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[AttributionTrace]:
    """Token attribution: figure "attribution" (each output token (row) onto the input tokens: integrated gradients
    with `steps` steps, or "gradient x input"). outputs: "all" (every next token and the prediction) or "prediction";
    by default the page's (the prediction alone on a large language model). trace:
    explorer.probes.token_attribution.AttributionTrace."""
    from explorer.probes.token_attribution import attribution, default_outputs
    from explorer.viz import token_attribution as V

    loaded = read(model, **read_args)
    trace = _run(attribution, loaded, text, target, int(steps), outputs or default_outputs(loaded), of=of)
    values = trace.integrated if method == "integrated gradients" else trace.gradient_x_input
    warning = V.completeness_warning(trace, int(_view_hi("token-attribution", "steps"))) \
        if method == "integrated gradients" else None  # the page's warning, in the same words
    return ViewResult("token-attribution", loaded.id, {
        "attribution": V.attribution_heatmap(values, trace.inputs, trace.outputs, method, _theme(projector))},
        trace, _notes(loaded, trace.notes, [warning] if warning else []))


@_as_it_was
def gradients_through_time(models: str | torch.nn.Module | Sequence[Model], text: str,
                           projector: bool = False) -> ViewResult[list[GradientTrace]]:
    """Gradients through time: figures "gradients" (‖∂ log p(last word) / ∂x_t‖ by distance, one line per model)
    and "jacobians" (the recurrent Jacobians' norms). trace: the list of GradientTraces."""
    from explorer.probes.gradients_through_time import gradients_through_time as grads
    from explorer.viz import gradients_through_time as V

    if isinstance(models, (str, torch.nn.Module)):
        models = [models]
    loaded = [read(m) for m in models]
    traces = [_run(grads, m, text) for m in loaded]
    theme = _theme(projector)
    return ViewResult("gradients-through-time", ", ".join(m.id for m in loaded), {
        "gradients": V.gradient_lines(traces, theme), "jacobians": V.jacobian_lines(traces, theme)}, traces,
        _notes(loaded[0], *(t.notes for t in traces)))


@_as_it_was
def masked_words(model: Model, text: str, k: int = 10, words: str = _view("masked-words", "words"), mask: int = -1,
                 projector: bool = False,
                 **read_args: Unpack[ReadArgs]) -> ViewResult[MaskedTrace]:
    """Masked-word prediction: figure "fill-<m>" per [MASK] (its top-k fillers, the model's own probabilities);
    `mask` >= 0 masks that word of the text first. trace: explorer.probes.masked_words.MaskedTrace."""
    from explorer.probes.masked_words import masked_fill
    from explorer.viz import masked_words as V

    read_args.setdefault("task", "masked-lm")
    loaded = read(model, **read_args)
    trace = _run(masked_fill, loaded, text, k, words, mask)
    theme = _theme(projector)
    return ViewResult("masked-words", loaded.id, {f"fill-{m}": V.fill_bars(trace, m, theme) for m in range(len(trace))},
                      trace, _notes(loaded, trace.notes))


@_as_it_was
def interventions(model: Model, text: str, corrupt: str, answer: str, wrong: str, site: str = "resid",
                  direction: str = "denoise", method: str = "exact", pos: int = -1, projector: bool = False,
                  **read_args: Unpack[ReadArgs]) -> ViewResult[PatchGrid]:
    """Activation patching: figure "patch_grid" (the fraction of the logit difference logit(answer) − logit(wrong)
    restored by each patched activation: exact patching, or "attribution" patching's estimate). trace: PatchGrid."""
    from explorer.probes import interventions as I
    from explorer.viz import interventions as V

    loaded = read(model, **read_args)
    contrast = _run(I.contrast, loaded, text, corrupt, answer, wrong)
    if method == "exact":
        grid = _run(I.patching, loaded, text, corrupt, answer, wrong, site, direction, pos)
    else:
        grid = _run(I.attribution, loaded, text, corrupt, answer, wrong, direction, pos)[site]
    title = f"{'Denoising' if direction == 'denoise' else 'Noising'}: {I.KINDS[site]} restored ({grid.method})"
    return ViewResult("interventions", loaded.id, {
        "patch_grid": V.restored_grid(grid, V.columns(grid, contrast.corrupt_tokens), title, _theme(projector))},
        grid, _notes(loaded, contrast.notes))


@_as_it_was
def seq2seq(model: Model, text: str, target: str = "", decoding: str = "greedy", beam: int = 4,
            layer: int | None = None, head: int | str = "mean", projector: bool = False,
            **read_args: Unpack[ReadArgs]) -> ViewResult[AlignmentTrace]:
    """Seq2seq alignment: figure "alignment" (which source token each output token attends to: Bahdanau or Luong
    attention, or a Hugging Face encoder-decoder's cross-attention at `layer` (default: the last, as the page),
    `head`); a model without attention has figure "reliance" instead (each output token's log-probability with the
    context vector and with it set to 0). trace: AlignmentTrace."""
    from explorer.probes.seq2seq import alignment_trace
    from explorer.viz import seq2seq as V

    loaded = read(model, **read_args)
    tr = _run(alignment_trace, loaded, text, target, decoding, beam)
    notes = _notes(loaded, tr.notes, tr.warnings)
    if tr.weights is None:
        figures = {} if tr.no_source_logprobs is None else {"reliance": V.reliance_figure(
            tr.out_tokens, tr.step_logprobs, tr.no_source_logprobs, _theme(projector))}
        return ViewResult("seq2seq", loaded.id, figures, tr, (*notes, V.NO_ATTENTION))
    layer = tr.n_layers - 1 if layer is None and tr.kind == "hf" else layer or 0
    matrix = tr.matrix(layer, head)
    assert matrix is not None  # the model has attention weights (above)
    return ViewResult("seq2seq", loaded.id, {
        "alignment": V.alignment_heatmap(matrix, tr.out_tokens, tr.src_tokens,
                                         V.alignment_title(loaded.id, tr.kind, layer, head), _theme(projector))},
                      tr, notes)


@_as_it_was
def training_curves(model: str, projector: bool = False) -> ViewResult[SeriesCurves]:
    """Watch it learn: figure "curves" (held-out loss, agreement, the number unit, neighbour precision at each
    snapshot of a model trained with snapshots). trace: explorer.training.curves.SeriesCurves."""
    from explorer.training import curves as TC
    from explorer.viz import training_curves as V

    try:
        curves = TC.series_curves(model)
    except ValueError as exc:
        raise NotebookError(str(exc)) from None
    return ViewResult("training-curves", model, {
        "curves": V.curves_figure(curves.steps, curves.curves, model, _theme(projector))}, curves, tuple(curves.notes))



@_as_it_was
def classify(model: Model, text: str, second: str = "", pair: str = "", label: int | str | None = None,
             foil: int | str | None = None, method: str = "integrated gradients", steps: int = 256,
             projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[DecisionTrace]:
    """What a classifier decides: figures "labels" (p(label) of `text`, and of `second` beside it), "prefixes" (a
    sentence classifier: the model run on each prefix) and "attribution" (each token's share of log p(label), or of
    log p(label) − log p(foil); label default: the chosen one; method "integrated gradients" or "gradient × input").
    `pair`: the second segment of a sentence-pair classifier. trace: explorer.probes.decision.DecisionTrace (labels,
    probs (C,), prefix_probs (T, C)); the attribution is in tables["attribution"]."""
    return _decision(model, text, second, pair, label, foil, method, steps, projector, False, read_args)


@_as_it_was
def tag(model: Model, text: str, token: int = -1, label: int | str | None = None, foil: int | str | None = None,
        method: str = "integrated gradients", steps: int = 256, projector: bool = False,
        **read_args: Unpack[ReadArgs]) -> ViewResult[DecisionTrace]:
    """What a tagger decides for each word: figures "tags" (tokens × labels, the chosen label in its cell) and
    "attribution" (the words' share of log p(label) at `token`, default the last word). trace: DecisionTrace (probs
    (T, C): one row per token shown in trace.tokens)."""
    return _decision(model, text, "", "", label, foil, method, steps, projector, True, read_args, token)


def _decision(model: Model, text: str, second: str, pair: str, label: int | str | None, foil: int | str | None,
              method: str, steps: int, projector: bool, per_token: bool, read_args: ReadArgs,
              token: int = -1) -> ViewResult[DecisionTrace]:
    from explorer.probes import decision as P
    from explorer.viz import decision as V

    loaded = read(model, **read_args)
    trace = _run(P.decide, loaded, text, pair)
    if trace.per_token != per_token:
        raise NotebookError(f"{loaded.id} is {trace.what}: use nb.{'tag' if trace.per_token else 'classify'}.")
    theme = _theme(projector)

    def index(x: int | str | None, default: int) -> int:
        if x is None:
            return default
        if isinstance(x, str):
            if x not in trace.labels:
                raise NotebookError(f"{loaded.id} has no label {x!r}; its labels: {', '.join(trace.labels)}.")
            return trace.labels.index(x)
        return int(x)

    where = token if token >= 0 else max(i for i, s in enumerate(trace.special) if not s) if per_token else -1
    chosen = int(trace.probs[where].argmax()) if per_token else int(trace.probs.argmax())
    attr = _run(P.attribute, loaded, text, index(label, chosen), index(foil, -1), where, pair, steps)
    figures: dict[str, go.Figure] = {}
    notes = list(trace.notes)
    if per_token:
        figures["tags"] = V.tag_grid(trace, theme)
    else:
        traces, names = [trace], ["A"]
        if second.strip():
            traces.append(_run(P.decide, loaded, second, pair))
            names.append("B")
        figures["labels"] = V.label_bars(traces, names, theme)
        if trace.prefix_probs is not None:
            figures["prefixes"] = V.prefix_lines(trace, theme)
    figures["attribution"] = V.attribution_bars(attr, method, theme)
    if (warning := V.completeness_warning(attr)) is not None:  # the page's warning, in the same words
        notes.append(warning)
    rows: list[Row] = [{"token": t, "gradient × input": float(g), "integrated gradients": float(i)}
                       for t, g, i in zip(attr.tokens, attr.gradient_x_input, attr.integrated)]
    return ViewResult("decision", loaded.id, figures, trace, _notes(loaded, notes), {
        "attribution": rows,
        "what was read from the model": [{"what": a, "value": b} for a, b in loaded.adapter.describe()]})
