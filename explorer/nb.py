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
from typing import (TYPE_CHECKING, Any, Callable, Concatenate, Generic, ParamSpec, Sequence, TypeAlias, TypedDict,
                    TypeGuard, TypeVar, Unpack)

import plotly.graph_objects as go
import torch

from explorer.runtime.errors import ViewError
from explorer.views import BY_PATH
from explorer.viz.theme import Theme, get_theme


def _view(path: str, key: str) -> Any:
    """The default the view `path` declares for its parameter `key`: a notebook function's default is the page's
    (tests/test_notebook.py compares every one)."""
    return BY_PATH[path].params[key].default


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
    from explorer.probes.position_formulas import RopeTrace, RotationTrace, SinusoidalTrace
    from explorer.probes.positional_encodings import LearnedTrace, ModelPositions, SentenceTrace
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
    from explorer.loading.loaders import LoadedModel, hf_family, hf_task

    config = model.config
    name = type(model).__name__
    family = hf_family(config)  # the task as the loaders read a saved config's, from the class in memory; a masked LM
    task = "masked-lm" if name.endswith("ForMaskedLM") else hf_task(config, family, [name])  # is loaded as one
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
    from explorer.loading.loaders import materialise
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
        loaded = materialise(bundle_from_parts(label, type(model).__name__, weights, files), device, dtype)
        if loaded.caps.decision is not None:  # a classifier or tagger: how it pools, read off its own forward
            loaded = _as_its_forward(model, loaded, lambda task: materialise(bundle_from_parts(
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


def _method(view: str, method: str) -> str:
    """`method` as the view names it, read by the URL's parser (case aside: "lrp" is "LRP"); NotebookError when the
    view has no such one."""
    from explorer.param_kinds import parse

    try:
        return str(parse("choice", method, BY_PATH[view].params["method"].choices))
    except ValueError as exc:
        raise NotebookError(f"method {exc}") from None


def _theme(projector: bool) -> Theme:
    return get_theme(projector)


def _notes(loaded: LoadedModel, *more: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*getattr(loaded, "notes", []), *(n for m in more for n in m)]))


# ------------------------------------------------------------------------------------------------ views
@_as_it_was
def lstm_gates(model: Model, text: str, gate: str | None = None, layer: int = 0, direction: int = 0,
               sort: str = "variance", top: int = 64, unit: int | None = None,
               section: str = _view("lstm-gates", "section"), t: int = _view("lstm-gates", "t"),
               pair: str | None = None, a: str | None = None, b: str | None = None, compare: Model | None = None,
               projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[GateTrace]:
    """Inside the recurrent cell, as the page draws it: figure "heatmap" (token × unit, state `gate`: None, the
    page's c where the cell has one, else h; the `top` units by `sort`; compare: a second model's beside it,
    "heatmap_b", and B − A, "heatmap_diff", where the two have the same shape of state), table "what was read from
    the model", and the `section`: "One unit + equations" ("unit_lines": every state of `unit`, default the first
    unit shown; `t`: the token of the cell's equations), "Gate saturation" ("saturation"), "Next tokens" (table
    "next_tokens") or "Compare two sentences" ("compare_sentences": the sentences of `pair`, one of the page's
    pairs, None the first, or "your own pair": `a` and `b`). A training step's units are sorted, and coloured, as in
    its trained model. trace: explorer.probes.lstm_gates.GateTrace (gates: name -> (layers, directions, T, H))."""
    from explorer.presenters import lstm_gates as V
    from explorer.probes import lstm_gates as P

    loaded = read(model, **read_args)
    trace = _run(P.rnn_gates, loaded, text)
    gate = V.default_state(trace) if gate is None else gate
    if gate not in trace.gates:
        raise NotebookError(f"{loaded.id} has no state {gate!r}; it has {', '.join(trace.names)}.")
    if not (0 <= layer < trace.num_layers and 0 <= direction < trace.num_directions):
        raise NotebookError(f"{loaded.id} has {trace.num_layers} layer(s) × {trace.num_directions} direction(s); "
                            f"got layer {layer}, direction {direction}.")
    if section not in V.SECTIONS:
        raise NotebookError(f"Unknown section {section!r}; use one of {', '.join(map(str, V.SECTIONS))}.")
    if len(trace) and section == V.SECTIONS[0] and not (0 <= t < len(trace) and 0 <= (unit or 0) < trace.hidden_size):
        raise NotebookError(f"{loaded.id} reads {len(trace)} tokens with {trace.hidden_size} units; got token {t}, "
                            f"unit {unit}.")
    snapshot = (getattr(loaded, "meta", None) or {}).get("snapshot")  # a training step: its trained model's order
    trained = read(snapshot["base"]) if isinstance(snapshot, dict) and snapshot.get("base") else None
    reference = None if trained is None or not len(trace) else _run(P.rnn_gates, trained, text)
    other, other_id, failed = None, "", ""
    if compare is not None and len(trace):
        other_id, other, failed = _beside(compare, read_args, P.rnn_gates, text)
    sentences = None
    if section == V.SECTIONS[3]:
        first, then = (_run(P.rnn_gates, loaded, s) for s in V.pair_texts(pair, a, b))
        sentences = (first, then)
    shown = V.present(trace, gate, layer, direction, sort, top, section, _theme(projector), loaded.id, loaded,
                      unit=unit, t=t, reference=reference, trained_id="" if trained is None else trained.id,
                      other=other, other_id=other_id, other_error=failed, pair=sentences)
    result = _result("lstm-gates", loaded, shown, trace)
    result.tables["what was read from the model"] = [{"what": what, "value": value} for what, value in trace.inferred]
    return result


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
        other_id, other, failed = _beside(compare, read_args, P.attention_trace, text, pair, stream, 0,
                                          arithmetic=False)
        notes += [f"{other_id} cannot be compared here: {failed}"] if failed else []
    second = _run(P.attention_trace, loaded, text2, "", stream, 0) if mode == "compare" and trace.tokens else None
    shown = V.present(trace, mode, layer, [head, *(h for h in heads if h != head)], how, token, hide,
                      _theme(projector), other, second)
    return _result("self-attention", loaded, shown, trace, notes)


def _beside(compare: Model, read_args: ReadArgs, probe: Callable[Concatenate[LoadedModel, P], R], *args: P.args,
            **kwargs: P.kwargs) -> tuple[str, R | None, str]:
    """A second model's run of the view's probe, to draw beside the first: (its id, its trace, "") or, when the view
    cannot show it, (its id, None, the view's message)."""
    other = read(compare, **read_args)
    try:
        return other.id, probe(other, *args, **kwargs), ""
    except ViewError as exc:
        return other.id, None, str(exc)


def _result(view: str, loaded: LoadedModel, shown: Presentation, trace: TraceT,
            *more: Sequence[str]) -> ViewResult[TraceT]:
    """A presenter's answer as the notebook returns it: its figures, its tables as rows, and every sentence it
    says (after what was inferred about the model)."""
    return ViewResult(view, loaded.id, _figures(shown), trace, _notes(loaded, *more, shown.texts()), _tables(shown))


def _figures(shown: Presentation) -> dict[str, go.Figure]:
    """A presenter's figures by name, each with its overlay's traces on top (a new figure: the page keeps the
    figure and its overlay apart, and may share the figure between sessions)."""
    return {name: panel.figure if panel.overlay is None else go.Figure(panel.figure).add_traces(panel.overlay.data)
            for name, panel in shown.figures.items()}


def _tables(shown: Presentation) -> dict[str, list[Row]]:
    """A presenter's tables by name, as rows."""
    return {name: [dict(zip(t.data, values)) for values in zip(*t.data.values())] for name, t in shown.tables.items()}


@_as_it_was
def positional_encodings(model: Model | None = None, n: int = _view("positional-encodings", "n_pos"),
                         d: int = _view("positional-encodings", "d_model"),
                         base: float = _view("positional-encodings", "base"),
                         text: str = "", seed: int = _view("positional-encodings", "seed"), panel: str | None = None,
                         pos: int = _view("positional-encodings", "pos"),
                         dim: int = _view("positional-encodings", "dim"), k: int = _view("positional-encodings", "k"),
                         sim: str = _view("positional-encodings", "sim"),
                         rope_qk: str = _view("positional-encodings", "rope_qk"),
                         pca: int = _view("positional-encodings", "pca"),
                         tok: int = _view("positional-encodings", "tok"),
                         compare: Model | None = None, projector: bool = False, **read_args: Unpack[ReadArgs]
                         ) -> ViewResult[SinusoidalTrace | RotationTrace | RopeTrace | LearnedTrace | ModelPositions
                                         | SentenceTrace]:
    """Positional encodings, as the page draws each `panel` (None: "sentence" with `text`, else "learned" with a
    model, else "sinusoidal"). Without a model, formulas on chosen numbers (n positions × d dimensions, base):
    "sinusoidal" (figures "pe_heatmap", the square on position `pos`, dimension 2·`dim`, and "pe_wavelengths"; trace:
    SinusoidalTrace), "similarity" (`sim` between positions, "pe_similarity" and "pe_similarity_line" of `pos`;
    PE(p + k) = R_k PE(p): "pe_rotation", "pe_rotation_errors"; trace: RotationTrace) or "rope" (RoPE at position
    `pos`, q and k `rope_qk`: "ones" or "random" under `seed`; "rope_scores", "rope_pairs"; trace: RopeTrace). With a
    model: "learned", its own positions: its position table ("learned_heatmap", "learned_similarity",
    "learned_similarity_line" of `pos`, "learned_pca" in `pca` dimensions; `compare`: a second model's table beside
    it, "learned_heatmap_b", and B − A, "learned_heatmap_diff"; trace: LearnedTrace), else its rotary θ
    ("model_wavelengths", "model_rope_scores"), ALiBi slopes ("alibi") or relative bias ("relative_bias") (trace:
    ModelPositions); "sentence": `text`'s token embeddings, position vectors and sums ("sentence_vectors",
    "sentence_lines" of token `tok`) and the words shuffled under `seed` ("permutation"; trace: SentenceTrace). A
    training step's table is coloured on its trained model's scale and placed on its PCA axes."""
    from explorer.adapters.base import Unsupported
    from explorer.presenters import positional_encodings as V
    from explorer.probes import position_formulas as PF
    from explorer.probes import positional_encodings as P

    theme = _theme(projector)
    panel = panel or ("sentence" if text else "learned" if model is not None else "sinusoidal")
    if panel not in V.PANELS:
        raise NotebookError(f"Unknown panel {panel!r}; use one of {', '.join(V.PANELS)}.")
    if panel in ("sinusoidal", "similarity", "rope"):
        n, d, base = int(n), int(d), float(base)
        try:
            table = PF.sinusoidal(n, d, base)
        except ValueError as exc:
            raise NotebookError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
        if not (0 <= pos < n and 0 <= k < n and 0 <= dim and (panel != "sinusoidal" or dim < d // 2)):
            raise NotebookError(f"{n} positions × {d} dimensions: pos and k are in 0..{n - 1}, dim in "
                                f"0..{d // 2 - 1}; got pos {pos}, k {k}, dim {dim}.")
        trace: SinusoidalTrace | RotationTrace | RopeTrace
        if panel == "sinusoidal":
            trace, shown = table, V.sinusoidal(table, pos, dim, theme)
            shown.say("line", *V.sinusoidal_notices(table))  # what to notice, as the page says it
        elif panel == "similarity":
            trace = PF.rotation_check(n, d, base, k)
            shown = V.similarity(PF.sinusoidal_similarity(n, d, base, sim), trace, pos, V.pair(d, dim), sim, n, d,
                                 base, theme)
            shown.say("line", *V.similarity_notices(trace))
        else:
            seed = seed if rope_qk == "random" else 0  # as the page: the seed only draws random vectors
            trace = PF.rope(d, n, base, pos, rope_qk, seed)
            shown = V.rope(trace, V.pair(d, dim), rope_qk, seed, theme)
            shown.say("line", *V.ROPE_NOTICES)
        return ViewResult("positional-encodings", "formula", _figures(shown), trace, shown.texts())
    if model is None:
        raise NotebookError(f"The {V.PANELS[panel]!r} panel reads a model: give one.")
    loaded = read(model, **read_args)
    try:
        if panel == "sentence":
            sv = _run(P.sentence_vectors, loaded, text)
            shown = V.sentence(sv, theme)
            if sv.tokens:  # the page's token slider and shuffle
                shown.add(V.token_vectors(sv, min(max(tok, 0), len(sv.tokens) - 1), theme))
                pt = _run(P.permutation_experiment, loaded, text, seed)
                shown.add(V.shuffle(pt, sv.notes, loaded.device, loaded.dtype, theme))
                shown.say("line", *V.shuffle_notices(pt, sv))  # what to notice, as the page says it
            return _result("positional-encodings", loaded, shown, sv)
        if _run(P.model_positions, loaded, "").kind == "rotary":  # q and k read from a sentence: the page's example
            text = text or loaded.adapter.examples(BY_PATH["positional-encodings"].sentences).default
        mp = _run(P.model_positions, loaded, text)
    except Unsupported as exc:
        raise NotebookError(str(exc)) from None
    shown = V.scheme(mp)
    learned: LearnedTrace | ModelPositions = mp
    analysis = None
    if mp.kind in ("learned", "sinusoidal"):
        try:
            lt, la = P.learned_positions(loaded), P.learned_analysis(loaded)
        except Unsupported as exc:  # the page says so in the panel
            shown.say("note", str(exc))
        else:
            learned, analysis = lt, la
            snapshot = (getattr(loaded, "meta", None) or {}).get("snapshot")  # a training step: its trained model's
            trained = read(snapshot["base"]) if isinstance(snapshot, dict) and snapshot.get("base") else None
            try:
                reference = None if trained is None else P.learned_positions(trained)
                ref_la = P.learned_analysis(trained) if trained and V.comparable(lt, reference) else None
            except Unsupported:
                reference = ref_la = None
            other, other_id, other_error = None, "", ""
            if compare is not None:
                other_id, other, other_error = _beside(compare, read_args, P.learned_positions)
            trained_id = "" if trained is None else trained.id
            similarity = V.similarity_of(la, sim)
            shown.add(V.table_heading(lt))
            shown.add(V.learned_table(lt, la, sim, theme, reference=reference, ref_la=ref_la, trained_id=trained_id,
                                      other=other, other_id=other_id, other_error=other_error))
            shown.add(V.position_line(similarity, min(max(pos, 0), similarity.shape[0] - 1), sim, theme))
            shown.add(V.learned_pca(lt, la, int(pca), theme, reference=reference, ref_la=ref_la,
                                    trained_id=trained_id))
    shown.add(V.scheme_figures(mp, theme))
    shown.say("line", *V.scheme_notices(mp, analysis))  # what to notice, as the page says it
    return _result("positional-encodings", loaded, shown, learned)


@_as_it_was
def word_embeddings(model: Model, words: str = "", method: str = _view("word-embeddings", "method"),
                    n: int = _view("word-embeddings", "n"), dims: int = _view("word-embeddings", "dims"),
                    nn: str | None = None, k: int = _view("word-embeddings", "k"), source: str = "input",
                    section: str = _view("word-embeddings", "section"), whole: bool = _view("word-embeddings", "whole"),
                    a: str = _view("word-embeddings", "a"), b: str = _view("word-embeddings", "b"),
                    c: str = _view("word-embeddings", "c"), ka: int = _view("word-embeddings", "ka"),
                    x1: str = _view("word-embeddings", "x1"), x2: str = _view("word-embeddings", "x2"),
                    y1: str = _view("word-embeddings", "y1"), y2: str = _view("word-embeddings", "y2"),
                    layer: int | None = None, cfit: str = _view("word-embeddings", "cfit"), s1: str | None = None,
                    s2: str | None = None, dw: str | None = None, compare: Model | None = None,
                    projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[EmbeddingTable]:
    """Word embeddings, as the page draws them: figure "projection" (the first n entries of the model's embedding
    table `source`, whole words only where the vocabulary has subwords and `whole`, by PCA, t-SNE or UMAP: the
    projection shipped with the app, else fitted here; the typed `words` marked on it), then the `section`:
    "neighbours" (table "neighbours": the k nearest entries of `nn`, None: the first typed word; `compare`: a second
    model's, "neighbours_b", and each model's cosines of the first's, "neighbours_compared"), "analogies" (table
    "analogies": a − b + c, the first `ka`), "axes" (figure "axes": the entries on the axes x1 → x2 and y1 → y2) or
    "contextual" (figures "context": `words` read as a sentence, every token's hidden state at each state, PCA fitted
    on all of them, cfit="all", or on `layer`, None the last; and "drift": the word `dw` in the sentences `s1` and
    `s2`, None the model's own pair). trace: the EmbeddingTable."""
    from explorer.presenters import word_embeddings as V
    from explorer.probes import contextual_embeddings as CE
    from explorer.probes import word_embeddings as P
    from explorer.projections import assets as A
    from explorer.projections import reduce as PR

    theme = _theme(projector)
    if section not in V.SECTIONS:
        raise NotebookError(f"Unknown section {section!r}; use one of {', '.join(V.SECTIONS)}.")
    loaded = read(model, **read_args)
    table = _run(P.embedding_table, loaded, source)
    v = V.model_vectors(table, loaded, source, loaded.id)
    found, shown = V.words(v, words)
    fit = V.fitted(table, int(n), whole and table.subword)
    reason = V.cannot_project(table, fit, method, int(dims))
    proj, failed = None, ""
    if not reason:  # the page's: shipped with the app, else fitted (the page fits a t-SNE or UMAP in the background)
        params = PR.params_for(method)
        try:
            proj = A.find(table, fit.rows, method, int(dims), params)
            proj = proj or PR.fit(table.vectors[fit.rows], method, int(dims), params)
        except PR.ProjectionError as exc:
            failed = str(exc)
    shown.add(V.projection_warnings(method, int(dims), int(n), reason, failed))
    shown.add(V.projection(v, proj, False, method, int(dims), fit, found, theme))
    here = ""  # the same word's cosines in two sentences, quoted in what to notice
    if section == "neighbours":
        other = table_b = None
        other_id = other_error = ""
        if compare is not None:
            other = read(compare, **read_args)
            other_id = other.id
            try:
                table_b = P.embedding_table(other, V.source_in(P.table_sources(other), source))
            except P.EmbeddingError as exc:
                other_error = str(exc)
        head, sides, tail = V.neighbours(v, V.first_word(table, found) if nn is None else nn, int(k), other_id,
                                         table_b, other, other_error)
        for part in (head, *(sides or ()), tail):
            shown.add(part)
    elif section == "analogies":
        shown.add(V.analogies(v, a, b, c, int(ka)))
    elif section == "axes":
        shown.add(V.axes(v, fit, found, x1, x2, y1, y2, theme))
    else:
        said = ""
        try:
            trace: CE.ContextTrace | None = CE.contextual(loaded, words)
        except CE.ContextError as exc:
            trace, said = None, str(exc)
        shown.add(V.context(trace, said))
        if trace is not None:
            last = len(trace.layer_names) - 1
            shown.add(V.layers(loaded.id, trace, last if layer is None else min(max(int(layer), 0), last), cfit,
                               theme))
        sa, sb, word = (x if x is not None else y for x, y in zip((s1, s2, dw), CE.drift_pair(loaded)))
        runs: V.Runs | str | None = None
        if sa and sb and word:
            try:
                runs = CE.contextual(loaded, sa), CE.contextual(loaded, sb)
            except CE.ContextError as exc:
                runs = str(exc)
        drift, here = V.drift(loaded.id, word, runs, said, theme)
        shown.add(drift)
    shown.say("line", *V.notices(v, fit, here))  # what to notice, as the page says it
    return _result("word-embeddings", loaded, shown, table)


@_as_it_was
def decoding_strategies(model: Model, prompt: str, strategies: Sequence[str] = ("greedy", "top-k", "top-p", "beam"),
                        seed: int = 0, max_new: int = 30, n: int = _view("decoding-strategies", "n"),
                        eos: bool = True, chat: bool = False, system: str = "", temperature: float = 1.0,
                        k: int = _view("decoding-strategies", "k"), p: float = 0.9, typical: float = 0.9,
                        minp: float = _view("decoding-strategies", "minp"), beam: int = 4, lp: float = 1.0,
                        rep: float = 1.0,
                        ngram: int = 0, min_new: int = 0, unk: bool = False,
                        section: str = _view("decoding-strategies", "section"), col: int = 0,
                        step: int = _view("decoding-strategies", "step"), view_t: float | None = None,
                        x: str = _view("decoding-strategies", "x"), y: str = _view("decoding-strategies", "y"),
                        compare: Model | None = None, projector: bool = False,
                        **read_args: Unpack[ReadArgs]) -> ViewResult[DecodingRun]:
    """Decoding strategies side by side, with Hugging Face's own logits processors, as the page draws them: figure
    "logprobs" (the model's log-probability of each generated token, one line per strategy); tables "metrics" (each
    column's first output) and "outputs" (each strategy's texts). Below, `section`: "step" (column `col`'s
    next-token distribution before its token `step` (1 = the first new token), at temperature `view_t` (None: the
    page's, the strategy's own where it samples, else 1): "step_bars"), "beam" (the first beam search's tree:
    "beam_tree") or "tradeoff" (diversity `x` against quality `y` over the n samples: table "summary", figure
    "tradeoff"). compare: a second model on the same prompt, strategies and seed (its lines dashed in "logprobs"; at a
    step, "step_bars_b" and "step_diff" where it reads the prompt as the same tokens). trace:
    explorer.probes.decoding_strategies.DecodingRun."""
    from explorer.adapters.generation import LABELS, DecodingError, Strategy
    from explorer.presenters import decoding_strategies as V
    from explorer.probes import decoding_strategies as D

    loaded = read(model, **read_args)
    unknown = [s for s in strategies if s not in LABELS]
    if unknown:
        raise NotebookError(f"Unknown strategies {', '.join(unknown)}: use {', '.join(LABELS)}.")
    chosen = tuple(Strategy(kind, temperature=temperature, top_k=k, top_p=p, typical_p=typical, min_p=minp,
                            num_beams=beam, length_penalty=lp, repetition_penalty=rep, no_repeat_ngram_size=ngram,
                            min_new_tokens=min_new, show_unknown=unk) for kind in strategies)
    run = _run(D.decode_all, loaded, prompt, chosen, seed, max_new, n, eos, chat, system)
    notes: list[str] = []
    other = run_b = None
    if compare is not None:
        other = read(compare, **read_args)
        try:
            if chat and D.chat_template(other) is None:
                raise DecodingError("it has no chat template to read the message with (turn Chat template off).")
            run_b = D.decode_all(other, prompt, chosen, seed, max_new, n, eos, chat, system)
        except ViewError as exc:
            notes.append(f"{other.id} cannot be compared here: {exc}")
    if section not in V.SECTIONS:
        raise NotebookError(f"Unknown section {section!r}: use {', '.join(V.SECTIONS)}.")
    if not 0 <= col < len(run.generations):
        raise NotebookError(f"There are {len(run.generations)} columns; got col {col}.")
    gen = run.generations[col]
    out = gen.outputs[0]
    sv = sv_b = at_a = None
    if section == "step" and out.ids:
        t = min(max(int(step), 1), len(out.ids)) - 1
        temp = V.view_t(gen) if view_t is None else float(view_t)
        sv = _run(D.step_view, loaded, run.prompt_ids, run.start_ids, out.ids, gen.strategy, t, temp)
        if other is not None and run_b is not None and D.reads_alike(other, run, run_b, sv.vocab_size):
            sv_b = _run(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, t, temp)
            at_a = _run(D.step_view, other, run.prompt_ids, run.start_ids, out.ids, gen.strategy, t, temp,
                        ids=tuple(int(i) for i in sv.ids))
    shown = V.present(run, _theme(projector), max_new, min_new, eos, n, chosen, section, col, sv, x, y,
                      D.chat_template(loaded), D.unknown_note(loaded, run.generations), run_b, sv_b, at_a)
    result = _result("decoding-strategies", loaded, shown, run, notes)
    result.tables["outputs"] = [{"strategy": g.strategy.label, "output": o.text} for g in run.generations
                                for o in g.outputs]
    return result


@_as_it_was
def logit_lens(model: Model, text: str, layer: int | None = None, pos: int | None = None,
               compare: Model | None = None, projector: bool = False,
               **read_args: Unpack[ReadArgs]) -> ViewResult[LensTrace]:
    """The logit lens, as the page draws it: figures "lens_grid" (each layer's top next token and its probability at
    each position, through the model's own final norm and output layer: every few layers of a deep model, and then
    "lens_grid_all" with all of them) and "lens_bars" (the top 10 after `layer` at position `pos`; default: the last
    layer, the last position); compare: a second model's grid ("lens_grid_b") and the probability it gives the first
    model's prediction minus the first model's ("lens_diff"). trace: explorer.probes.logit_lens.LensTrace."""
    from explorer.presenters import logit_lens as V
    from explorer.probes import logit_lens as P

    loaded = read(model, **read_args)
    trace = _run(P.logit_lens, loaded, text)
    L, T = trace.top_probs.shape
    layer, pos = L - 1 if layer is None else int(layer), T - 1 if pos is None else int(pos)
    if not (0 <= layer < L and 0 <= pos < T):
        raise NotebookError(f"{loaded.id} has {L} layers and reads {T} tokens here; got layer {layer}, pos {pos}.")
    other, tracked, failed, other_id = None, None, "", ""
    if compare is not None:
        b = read(compare, **read_args)
        other_id = b.id
        try:
            other = P.logit_lens(b, text)
        except P.LensError as exc:
            failed = str(exc)
        else:
            try:
                tracked = P.probability_of(b, text, trace.final_ids) if V.comparable(trace, other) else None
            except P.LensError:
                tracked = None
    theme = _theme(projector)
    shown = V.head(trace).add(V.present(trace, layer, pos, theme, other, other_id, tracked, failed))
    return _result("logit-lens", loaded, shown.add(V.all_layers(trace, layer, pos, theme)[1]), trace)


@_as_it_was
def token_attribution(model: Model, text: str, method: str | None = None,
                      steps: int = _view("token-attribution", "steps"),
                      target: str = "", outputs: str | None = None, of: str = "log-probability",
                      out: int | None = None, compare: Model | None = None, foil: str = "",
                      projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[AttributionTrace]:
    """Token attribution, as the page draws it: figure "attribution" (each output token (row) onto the input tokens:
    integrated gradients with `steps` steps, "gradient × input", or "lrp" (LRP's relevance of the logit); by default
    the page's: LRP on a large language model where it was measured the most faithful, else integrated gradients;
    the row of output `out` outlined, default the last), and the notes: the method's numbers for that output
    (integrated gradients' completeness, LRP's conservation and what biases, position vectors and the softmax
    absorbed) and, where integrated gradients do not add up, the page's completeness warning in its words. foil: a
    contrastive question, f(output) − f(foil): a word, or "second" (each output's most likely other token).
    outputs: "all" (every next token and the prediction) or "prediction"; by default the page's (the prediction
    alone on a large language model). compare: a second model's attribution ("attribution_b") and B − A
    ("attribution_diff") where both read the same tokens, on one colour scale. A snapshot of a model trained with
    snapshots is coloured on the trained model's scale, as on the page.
    trace: explorer.probes.token_attribution.AttributionTrace."""
    from explorer.presenters import token_attribution as V
    from explorer.probes.token_attribution import AttributionError, attribution, default_method, default_outputs

    loaded = read(model, **read_args)
    method = _method("token-attribution", method or default_method(loaded))
    outputs = "all" if loaded.adapter.is_encoder_decoder else outputs or default_outputs(loaded)
    trace = _run(attribution, loaded, text, target, int(steps), outputs, of=of, foil=foil, method=method)
    M = len(trace.outputs)
    out = M - 1 if out is None else int(out)
    if not 0 <= out < M:
        raise NotebookError(f"{loaded.id} attributes {M} outputs here; got out={out}.")
    snapshot = getattr(loaded, "meta", {}).get("snapshot")
    trained = read(snapshot["base"]) if isinstance(snapshot, dict) and snapshot.get("base") else None
    reference = other = None
    failed = other_id = ""
    if trained is not None:
        try:
            reference = attribution(trained, text, target, int(steps), outputs, of=of, foil=foil,
                                    method=method)
        except AttributionError:
            reference = None
    if compare is not None:
        other_id, other, failed = _beside(compare, read_args, attribution, text, target, int(steps), outputs, of=of,
                                          foil=foil, method=method)
    shown = V.present(trace, method, out, outputs, _theme(projector), reference,
                      trained.id if trained is not None else "", other, other_id, failed, loaded.family)
    return _result("token-attribution", loaded, shown, trace)


@_as_it_was
def gradients_through_time(models: str | torch.nn.Module | Sequence[Model], text: str,
                           projector: bool = False) -> ViewResult[list[GradientTrace]]:
    """Gradients through time, as the page draws it: figures "gradients" (‖∂ log p(last word) / ∂x_t‖ by distance,
    one line per model) and "jacobians" (the recurrent Jacobians' norms). A model that cannot be differentiated is
    left out with a note naming it (all of them: NotebookError). trace: the list of GradientTraces (input_grad,
    distance, products: (T,); step_norms: (T − 1,))."""
    from explorer.presenters import gradients_through_time as V
    from explorer.probes.gradients_through_time import GradientError, gradients_through_time as grads

    if isinstance(models, (str, torch.nn.Module)):
        models = [models]
    loaded = [read(m) for m in models]
    traces, failed = [], []
    for m in loaded:
        try:
            traces.append(grads(m, text))
        except GradientError as exc:  # one model left out, the others shown (as the page)
            failed.append((m.id, str(exc)))
    if not traces:
        raise NotebookError(failed[0][1] if len(failed) == 1 else
                            " ".join(f"{mid}: {why}" for mid, why in failed) or V.NONE)
    result = _result("gradients-through-time", loaded[0], V.present(traces, _theme(projector), failed), traces)
    result.model_id = ", ".join(m.id for m in loaded)
    return result


@_as_it_was
def masked_words(model: Model, text: str, k: int = 10, words: str = _view("masked-words", "words"), mask: int = -1,
                 b: str = _view("masked-words", "b"), compare: Model | None = None, projector: bool = False,
                 **read_args: Unpack[ReadArgs]) -> ViewResult[MaskedTrace]:
    """Masked-word prediction, as the page draws it: figure "fill-<m>" per [MASK] (its top-k fillers, the model's
    own probabilities; `mask` >= 0 masks that word of the text first), "fill-B-<m>" per [MASK] of the second
    sentence `b` ("": none), a second model `compare` beside the first ("cmp-a-<m>", "cmp-b-<m>" and p(B) − p(A),
    "cmp-diff-<m>"), "compared-chart" (the compared `words` at every mask); the softmax's numbers in the notes.
    trace: explorer.probes.masked_words.MaskedTrace (probs: (M, k))."""
    from explorer.presenters import masked_words as V
    from explorer.probes import masked_words as P

    read_args.setdefault("task", "masked-lm")
    loaded = read(model, **read_args)
    trace = _run(P.masked_fill, loaded, text, k, words, mask)
    second = _run(P.masked_fill, loaded, b, k, words, -1) if len(trace) and b.strip() else None
    other = at_a = None
    other_id = failed = ""
    if compare is not None and len(trace):
        them = read(compare, **read_args)
        other_id, other, failed = _beside(them, read_args, P.masked_fill, text, k, words, mask)
        if other is not None and len(other) and V.same_reading(trace, other):
            at_a = P.masked_fill(them, text, k, words, mask, V.top_ids(trace))
    shown = V.present(trace, second, loaded.id, loaded.adapter.name, _theme(projector), other_id, other, at_a, failed)
    return _result("masked-words", loaded, shown, trace)


@_as_it_was
def interventions(model: Model, text: str, corrupt: str, answer: str, wrong: str, site: str = "resid",
                  direction: str = "denoise", method: str = "exact", pos: int = -1, dir: str = "fwd",
                  layer: int | None = None, col: int | None = None, range: str = "1",
                  ablate: str | Sequence[str] = "", how: str = "zero", compare: Model | None = None,
                  projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[PatchGrid]:
    """Activation patching, as the page draws it: figure "patch_grid" (the fraction of the logit difference
    logit(answer) − logit(wrong) restored by each patched activation of `site`: "exact" patching, or "attribution"
    patching's estimate; "both": the exact grid, then "patch_estimate" and "patch_scatter"), its cell (`layer`, `col`;
    None: the page's, the strongest) outlined on the colour range `range` ("1" or "fit"); `pos`: the one position a
    head grid patches (-1: every one), `dir`: the direction of a bidirectional recurrence. compare: a second model's
    grid ("patch_grid_b", and "patch_grid_diff" where the grids have the same cells). Then figure "ablation": the next
    tokens of the clean prompt with the components `ablate` (L3H2, L3MLP, L3ATTN, L0U12; comma-separated or a list)
    ablated `how` ("zero", "mean", "resample"). trace: PatchGrid (restored: R × K)."""
    from explorer.presenters import interventions as V
    from explorer.probes import interventions as I

    loaded = read(model, **read_args)
    contrast = _run(I.contrast, loaded, text, corrupt, answer, wrong)
    args = (text, corrupt, answer, wrong)
    exact = _run(I.patching, loaded, *args, site, direction, pos, dir) if method != "attribution" else None
    estimates = _run(I.attribution, loaded, *args, direction, pos, dir) if method != "exact" else None
    if estimates is not None and site not in estimates:
        raise NotebookError(f"{loaded.id} has no {I.KINDS.get(site, site)} to patch; it has {', '.join(estimates)}.")
    grid = V.shown(exact, estimates, site)
    best = grid.strongest()
    cell = (best[0] if layer is None else int(layer), best[1] if col is None else int(col))
    if not (0 <= cell[0] < grid.restored.shape[0] and 0 <= cell[1] < grid.restored.shape[1]):
        raise NotebookError(f"The grid has {grid.restored.shape[0]} rows × {grid.restored.shape[1]} columns; got "
                            f"layer {cell[0]}, column {cell[1]}.")
    notes: list[str] = []
    other = None
    if compare is not None:
        b = read(compare, **read_args)
        try:
            I.layout(b)
            I.contrast(b, *args)
            other = (b.id, I.patching(b, *args, site, direction, pos, dir) if grid.method == "exact" else
                     I.attribution(b, *args, direction, pos, dir)[site])
        except (ViewError, KeyError) as exc:
            notes.append(f"{b.id} cannot be compared here: "
                         + (f"it has no {I.KINDS[site]} to patch." if isinstance(exc, KeyError) else str(exc)))
    codes = tuple(c.strip() for c in (ablate.split(",") if isinstance(ablate, str) else ablate) if c.strip())
    ablation = _run(I.ablation, loaded, text, codes, how, corrupt, answer, wrong)
    shown = V.present(contrast, grid, site, direction, method, cell, range, ablation, _theme(projector),
                      estimates[site] if exact is not None and estimates is not None else None, other)
    return _result("interventions", loaded, shown, grid, notes)


@_as_it_was
def seq2seq(model: Model, text: str, target: str = "", decoding: str = "greedy", beam: int = 4,
            layer: int | None = None, head: int | str = "mean", step: int = 0, panel: str | None = None,
            allcurves: bool = True, model2: Model | None = None, projector: bool = False,
            **read_args: Unpack[ReadArgs]) -> ViewResult[AlignmentTrace]:
    """Seq2seq alignment, as the page draws it: figure "alignment" (which source token each output token attends to:
    Bahdanau or Luong attention, or a Hugging Face encoder-decoder's cross-attention at `layer` (default: the last,
    as the page), `head`; output position `step` outlined); a model without attention has figure "reliance" instead
    (each output token's log-probability with the context vector and with it set to 0). model2: a second model
    beside the first ("alignment_b" or "reliance_b"). Below, `panel` (None: the page's, the beam tree after a beam
    search, else "step"): "step" (figure "step_weights", tables "candidates" and "score_parts": step `step`'s
    arithmetic), "length" (figure "length_curve": exact match against source length, every built-in's on the same
    corpus with `allcurves`) or "beam" ("beam_tree"). trace: AlignmentTrace (weights: L, H, T, S)."""
    from explorer.loading.catalogue import builtin_metas
    from explorer.presenters import seq2seq as V
    from explorer.probes import seq2seq as P

    loaded = read(model, **read_args)
    tr = _run(P.alignment_trace, loaded, text, target, decoding, beam)
    layer = tr.n_layers - 1 if layer is None and tr.kind == "hf" else layer or 0
    if tr.kind == "hf" and not (0 <= layer < tr.n_layers):
        raise NotebookError(f"{loaded.id} has {tr.n_layers} decoder layers; got layer {layer}.")
    second: AlignmentTrace | str | None = None
    others = [loaded]
    if model2 is not None and model2 != "none" and tr.out_ids:
        b = read(model2, **read_args)
        others.append(b)
        try:
            second = P.alignment_trace(b, text, target, decoding, beam)
        except P.Seq2SeqError as exc:
            second = str(exc)
    offered, first = V.panels(tr)
    panel = first if panel is None else panel
    if panel not in offered:
        raise NotebookError(f"Panel {panel!r} is not offered here; use {', '.join(offered)}.")
    curves: list[P.LengthCurve] = []
    if panel == "length":
        for lm in others:
            if lm.caps.alignment is not None:
                try:
                    curves.append(P.length_accuracy(lm))
                except P.Seq2SeqError:  # no curve for this model: the caption says which have one
                    pass
    builtins = P.builtin_length_curves(builtin_metas(), P.corpus_of(loaded)) if panel == "length" and allcurves \
        else ()
    step = min(max(int(step), 0), max(len(tr.out_ids) - 1, 0))
    shown = V.present(tr, layer, str(head), step, panel, _theme(projector), second, curves, builtins)
    return _result("seq2seq", loaded, shown, tr)


@_as_it_was
def training_curves(model: str, score: str = _view("training-curves", "score"),
                    projector: bool = False) -> ViewResult[SeriesCurves]:
    """Watch it learn, as the page draws it: figures "curves" (held-out loss, agreement, the number unit, neighbour
    precision at each snapshot of a model trained with snapshots) and, for a transformer, "heads" (each head's `score`,
    "previous-token" or "induction", at each snapshot); table "snapshots" (every snapshot's numbers).
    trace: explorer.training.curves.SeriesCurves."""
    from explorer.presenters import training_curves as V
    from explorer.training import curves as TC

    try:
        curves = TC.series_curves(model)
    except ValueError as exc:
        raise NotebookError(str(exc)) from None
    if curves.heads and score not in curves.heads:
        raise NotebookError(f"Unknown score {score!r}; use one of {', '.join(curves.heads)}.")
    theme = _theme(projector)
    shown = V.present(curves, model, theme).add(V.heads(curves, score, theme)).add(V.snapshots(curves))
    shown.say("line", *V.notices(curves))  # what to notice, as the page says it
    return ViewResult("training-curves", model, _figures(shown), curves, shown.texts(), _tables(shown))


@_as_it_was
def classify(model: Model, text: str, second: str = "", pair: str = "", label: int | str | None = None,
             foil: int | str | None = None, method: str = "integrated gradients", steps: int = 256,
             compare: Model | None = None, projector: bool = False,
             **read_args: Unpack[ReadArgs]) -> ViewResult[DecisionTrace]:
    """What a classifier decides, as the page draws it: figures "labels" (p(label) of `text`, and of `second` beside
    it), "prefixes" (a sentence classifier: the model run on each prefix) and "attribution" (each token's share of
    log p(label), or of log p(label) − log p(foil); label default: the chosen one; method "integrated gradients" or
    "gradient × input"); compare: a second model's own labels ("compare"). `pair`: the second segment of a
    sentence-pair classifier. trace: explorer.probes.decision.DecisionTrace (labels, probs (C,), prefix_probs
    (T, C)); the attribution is in tables["attribution"]."""
    return _decision(model, text, second, pair, label, foil, method, steps, projector, False, read_args,
                     compare=compare)


@_as_it_was
def tag(model: Model, text: str, token: int = -1, label: int | str | None = None, foil: int | str | None = None,
        method: str = "integrated gradients", steps: int = 256, compare: Model | None = None,
        projector: bool = False, **read_args: Unpack[ReadArgs]) -> ViewResult[DecisionTrace]:
    """What a tagger decides for each word, as the page draws it: figures "tags" (tokens × labels, the chosen label
    in its cell) and "attribution" (the words' share of log p(label) at `token`, default the last word); compare: a
    second model's own labels ("compare"). trace: DecisionTrace (probs (T, C): one row per token shown in
    trace.tokens)."""
    return _decision(model, text, "", "", label, foil, method, steps, projector, True, read_args, token, compare)


def _decision(model: Model, text: str, second: str, pair: str, label: int | str | None, foil: int | str | None,
              method: str, steps: int, projector: bool, per_token: bool, read_args: ReadArgs,
              token: int = -1, compare: Model | None = None) -> ViewResult[DecisionTrace]:
    from explorer.presenters import decision as V
    from explorer.probes import decision as P

    loaded = read(model, **read_args)
    method = _method("decision", method)
    trace = _run(P.decide, loaded, text, pair)
    if trace.per_token != per_token:
        raise NotebookError(f"{loaded.id} is {trace.what}: use nb.{'tag' if trace.per_token else 'classify'}.")
    theme = _theme(projector)

    def index(x: int | str | None) -> int:
        if x is None:
            return -1
        if isinstance(x, str):
            if x not in trace.labels:
                raise NotebookError(f"{loaded.id} has no label {x!r}; its labels: {', '.join(trace.labels)}.")
            return trace.labels.index(x)
        return int(x)

    where = (token if token >= 0 else V.last_word(trace)) if per_token else -1
    asked, against = index(label), index(foil)  # -1: the model's choice; no contrast
    explained, contrast = V.question(trace, where, asked, against)
    attr = _run(P.attribute, loaded, text, explained, contrast, where, pair, steps)
    beside = _run(P.decide, loaded, second, pair) if second.strip() and not per_token else None
    other, failed, other_id = None, "", ""
    if compare is not None:
        other_id, other, failed = _beside(compare, read_args, P.decide, text, pair)
    shown = V.main(trace, text, beside, second, theme).add(V.present(
        trace, attr, where, asked, against, method, loaded.adapter.name, theme, other, other_id, failed,
        family=loaded.family))
    result = _result("decision", loaded, shown.add(V.described(loaded.adapter.describe())), trace)
    lrp = attr.lrp.relevance[0] if attr.lrp is not None else [float("nan")] * len(attr.tokens)
    result.tables["attribution"] = [{"token": t, "gradient × input": float(g), "integrated gradients": float(i),
                                     "LRP": float(r)}
                                    for t, g, i, r in zip(attr.tokens, attr.gradient_x_input, attr.integrated, lrp)]
    return result
