"""Interventions: a model run with some of its activations replaced at named sites, scoped to one call.

Sites take the activation record's names (explorer.adapters.base, TransformerLens's hook names). Per batch row:

  decoders (transformers)
    blocks.{l}.resid_pre     (T, C)     what block l reads: the residual stream before it
    blocks.{L-1}.resid_post  (T, C)     the residual stream after the last block, before the final norm
    blocks.{l}.attn_out      (T, C)     what block l's attention adds to the stream (its output projection's output)
    blocks.{l}.mlp_out       (T, C)     what block l's MLP adds to the stream
    blocks.{l}.attn.z        (T, H, d)  each head's output, before the output projection mixes the heads
  recurrent networks
    rnn.{l}.{dir}.h | .c     (T, H)     layer l's hidden state (and an LSTM's cell state), dir "fwd" | "bwd"

A `Patch` replaces, in some rows of a batch, the entries of one site where its mask is true by its values.

Transformers: `TransformerSites.install()` registers forward hooks on the blocks, their attention, MLP and attention
output projection once, when the adapter is built. A hook does nothing unless a call in the same thread opened a
`scope` (a context variable): other sessions running the shared model meanwhile are untouched, and nothing is added
to or removed from the model per call. Inside a scope the hooks apply the scope's patches, keep the activations it
asks for (in the autograd graph, for gradients) and the arguments each block was called with, so that a batch can
be resumed from block l (`resume`): the blocks before l give every patched row the same result and are not run again.

Recurrent networks: explorer.adapters.recurrent.unroll runs the stacked recurrence step by step from the weights
with PyTorch's equations, patching h and c as they are made (a patch at step t reaches every later step and every
layer above); the recurrence's patching lives with the recurrence (PatchesRecurrence), which imports this module's
Patch and Layout, never the other way.
"""
from __future__ import annotations

import contextvars
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import torch

from explorer.adapters.base import Names, wants

if TYPE_CHECKING:
    from explorer.adapters.task_head import TaskHead

_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("explorer_intervention", default=None)

BlockCall = tuple[tuple[object, ...], dict[str, object]]  # a block's (args, kwargs) as it was called, passed back as is
Metric = Callable[[torch.Tensor], torch.Tensor]  # logits (1, V) -> a scalar to differentiate


@dataclass(frozen=True)
class Patch:
    """Replace, in batch rows `rows` (K,), the entries of `site` where `mask` is true by `value`.

    mask (K, T, ...) bool and value (K, T, ...): the site's activation in those rows (shapes in the module docstring),
    or broadcastable to it past the T axis (e.g. (K, T, 1) for every unit of a position)."""

    site: str
    rows: torch.Tensor
    mask: torch.Tensor
    value: torch.Tensor

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, ...) -> a copy with the patch applied."""
        rows = self.rows.to(x.device)
        out = x.clone()
        out[rows] = torch.where(self.mask.to(x.device), self.value.to(x.device, x.dtype), x[rows])
        return out

    def apply_step(self, t: int, x: torch.Tensor) -> torch.Tensor:
        """x (B, ...) the site at step t -> a copy with step t of the patch applied (recurrent networks)."""
        return Patch(self.site, self.rows, self.mask[:, t], self.value[:, t]).apply(x)


@dataclass
class Scope:
    """What the hooks do during one call: `patches` by site, the sites to `keep` (glob patterns; `kept` receives
    them, graph attached), and with `calls` set, each block's (args, kwargs) as it was called."""

    patches: dict[str, list[Patch]] = field(default_factory=dict)
    keep: Names = ()
    kept: dict[str, torch.Tensor] = field(default_factory=dict)
    calls: dict[int, BlockCall] | None = None
    grad: bool = False  # kept sites that nothing upstream makes differentiable become leaves that require grad

    def site(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The activation `x` of site `name` after this scope's patches (kept when asked for)."""
        for patch in self.patches.get(name, ()):
            x = patch.apply(x)
        if self.keep and wants(self.keep, name):
            if self.grad and not x.requires_grad:
                x = x.detach().requires_grad_(True)
            self.kept[name] = x
        return x


def by_site(patches: Sequence[Patch]) -> dict[str, list[Patch]]:
    """The patches grouped by the site they edit."""
    found: dict[str, list[Patch]] = {}
    for p in patches:
        found.setdefault(p.site, []).append(p)
    return found


@contextmanager
def scope(patches: Sequence[Patch] = (), keep: Names = (), calls: bool = False) -> Iterator[Scope]:
    """Open an intervention scope for the calls made inside it, in this thread only."""
    current = Scope(by_site(patches), keep, {}, {} if calls else None)
    token = _SCOPE.set(current)
    try:
        yield current
    finally:
        _SCOPE.reset(token)


def _first(output: object) -> torch.Tensor:
    """A module's output tensor (a block or attention may return a tuple whose first item it is)."""
    out = output[0] if isinstance(output, tuple) else output
    assert isinstance(out, torch.Tensor)
    return out


def _with_first(output: object, x: torch.Tensor) -> object:
    return (x, *output[1:]) if isinstance(output, tuple) else x


@dataclass
class TransformerSites:
    """Where a decoder's sites are: its blocks in order, and in each its attention, MLP and the attention's output
    projection (None where a block has no such module). n_heads: query heads; head_dim: the size of one head's output
    as the output projection reads it (in_features / n_heads)."""

    blocks: Sequence[torch.nn.Module]
    attn: list[torch.nn.Module | None]
    mlp: list[torch.nn.Module | None]
    proj: list[torch.nn.Module | None]
    n_heads: int
    head_dim: int
    installed: bool = False

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def kinds(self) -> tuple[str, ...]:
        """The site kinds every block has: resid always; attn, mlp and heads where found in every block."""
        out = ["resid"]
        if all(a is not None for a in self.attn):
            out.append("attn")
        if all(m is not None for m in self.mlp):
            out.append("mlp")
        if self.head_dim and all(p is not None for p in self.proj):
            out.append("heads")
        return tuple(out)

    def install(self) -> None:
        """Register the hooks, once (they do nothing outside a `scope`)."""
        if self.installed:
            return
        last = self.n_layers - 1
        for layer, block in enumerate(self.blocks):
            block.register_forward_pre_hook(_block_pre(layer), with_kwargs=True)
            if layer == last:
                block.register_forward_hook(_output_hook(f"blocks.{layer}.resid_post"))
            attn, mlp, proj = self.attn[layer], self.mlp[layer], self.proj[layer]
            if attn is not None:
                attn.register_forward_hook(_output_hook(f"blocks.{layer}.attn_out"))
            if mlp is not None:
                mlp.register_forward_hook(_output_hook(f"blocks.{layer}.mlp_out"))
            if proj is not None and self.head_dim:
                proj.register_forward_pre_hook(_heads_pre(f"blocks.{layer}.attn.z", self.n_heads))
        self.installed = True

    def resume(self, layer: int, hidden: torch.Tensor, calls: dict[int, BlockCall]) -> torch.Tensor:
        """hidden (B, T, C) entering block `layer` -> (B, T, C) after the last block, running blocks layer..L−1 with
        the arguments they were called with in `calls` (batch 1, broadcast over B) inside the current scope.
        layer == L: only the patches of blocks.{L−1}.resid_post are applied."""
        current = _SCOPE.get()
        for j in range(layer, self.n_layers):
            args, kwargs = calls[j]
            if args:
                out = self.blocks[j](hidden, *args[1:], **kwargs)
            else:
                out = self.blocks[j](**{**kwargs, "hidden_states": hidden})
            hidden = _first(out)
        if layer == self.n_layers and current is not None:
            hidden = current.site(f"blocks.{self.n_layers - 1}.resid_post", hidden)
        return hidden


BlockPreHook = Callable[[torch.nn.Module, tuple[object, ...], dict[str, object]], BlockCall | None]
OutputHook = Callable[[torch.nn.Module, tuple[object, ...], object], object]
PreHook = Callable[[torch.nn.Module, tuple[object, ...]], tuple[object, ...] | None]


def _patched(current: Scope, name: str, x: object) -> object:
    """A block's hidden states after the scope's patches at `name` (a block is always called with a tensor)."""
    return current.site(name, x) if isinstance(x, torch.Tensor) else x


def _block_pre(layer: int) -> BlockPreHook:
    name = f"blocks.{layer}.resid_pre"

    def hook(module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> BlockCall | None:
        current = _SCOPE.get()
        if current is None:
            return None
        if args:
            x = _patched(current, name, args[0])
            args = (x, *args[1:])
        else:
            kwargs = {**kwargs, "hidden_states": _patched(current, name, kwargs["hidden_states"])}
        if current.calls is not None:
            current.calls[layer] = (args, kwargs)
        return args, kwargs
    return hook


def _output_hook(name: str) -> OutputHook:
    def hook(module: torch.nn.Module, args: tuple[object, ...], output: object) -> object:
        current = _SCOPE.get()
        if current is None:
            return None
        return _with_first(output, current.site(name, _first(output)))
    return hook


def _heads_pre(name: str, n_heads: int) -> PreHook:
    def hook(module: torch.nn.Module, args: tuple[object, ...]) -> tuple[object, ...] | None:
        current = _SCOPE.get()
        if current is None or not args:
            return None
        z = args[0]
        if not isinstance(z, torch.Tensor):  # an output projection is always called with a tensor
            return None
        heads = current.site(name, z.reshape(*z.shape[:-1], n_heads, z.shape[-1] // n_heads))  # (B, T, H, d)
        return (heads.reshape(z.shape), *args[1:])
    return hook


# ------------------------------------------------------------------------------ finding the sites of a model
_ATTN = re.compile(r"attn|attention", re.IGNORECASE)
_CROSS = re.compile(r"cross|encoder_attn", re.IGNORECASE)
_MLP = re.compile(r"^(mlp|feed_forward|ffn|ff|fc|block_sparse_moe)$|MLP", re.IGNORECASE)
_PROJ = ("o_proj", "c_proj", "out_proj", "dense", "o", "wo", "proj")


def _block_list(root: torch.nn.Module, n_layers: int) -> torch.nn.ModuleList | None:
    """The first ModuleList under `root` (breadth first) that holds `n_layers` blocks with parameters."""
    queue = [root]
    while queue:
        module = queue.pop(0)
        for child in module.children():
            if isinstance(child, torch.nn.ModuleList) and len(child) == n_layers and \
                    all(any(True for _ in b.parameters()) for b in child):
                return child
            queue.append(child)
    return None


def _child(block: torch.nn.Module, by_name: re.Pattern[str]) -> torch.nn.Module | None:
    """The block's direct child whose attribute or class name matches (cross-attention left out)."""
    for name, child in block.named_children():
        label = f"{name} {type(child).__name__}"
        if by_name.search(name) or by_name.search(type(child).__name__):
            if not _CROSS.search(label) and not re.search("norm", label, re.IGNORECASE) \
                    and not isinstance(child, torch.nn.ModuleList) and any(True for _ in child.parameters()):
                return child  # not a norm, a dropout or a list of sub-blocks
    return None


def _projection(attn: torch.nn.Module | None, width: int) -> torch.nn.Module | None:
    """The attention's output projection: a direct child named like one (o_proj, c_proj, out_proj, dense, …) whose
    weight maps the heads' concatenated outputs to the model width."""
    if attn is None:
        return None
    for name in _PROJ:
        child = getattr(attn, name, None)
        weight = getattr(child, "weight", None)
        if isinstance(child, torch.nn.Module) and isinstance(weight, torch.Tensor) and weight.dim() == 2 \
                and width in weight.shape:
            return child
    return None


def find_sites(root: torch.nn.Module, n_layers: int, n_heads: int, width: int) -> TransformerSites | None:
    """The sites of a decoder whose blocks live in one ModuleList of `n_layers` under `root` (None if not found)."""
    blocks = _block_list(root, n_layers) if n_layers else None
    if blocks is None:
        return None
    attn = [_child(b, _ATTN) for b in blocks]
    mlp = [_child(b, _MLP) for b in blocks]
    proj = [_projection(a, width) for a in attn]
    sizes = {_in_features(p) for p in proj if p is not None}
    head_dim = 0
    if len(sizes) == 1 and n_heads:
        size = sizes.pop()
        head_dim = size // n_heads if size % n_heads == 0 else 0
    return TransformerSites(list(blocks), attn, mlp, proj, n_heads, head_dim)


def _in_features(proj: torch.nn.Module) -> int:
    """What the projection reads: nn.Linear (out, in); Conv1D (GPT-2) stores (in, out)."""
    weight = proj.weight
    assert isinstance(weight, torch.Tensor)
    return int(weight.shape[1] if isinstance(proj, torch.nn.Linear) else weight.shape[0])


# ------------------------------------------------------------------------------ the adapters' capability
@dataclass(frozen=True)
class Layout:
    """What can be patched in a model: n_layers blocks (or recurrent layers); kinds among "resid", "attn", "mlp",
    "heads" (decoders) or "h", "c" (recurrent); n_heads query heads; directions ("fwd",) or ("fwd", "bwd"); note: what
    was found where (shown by the view)."""

    n_layers: int
    kinds: tuple[str, ...]
    n_heads: int = 0
    directions: tuple[str, ...] = ("fwd",)
    note: str = ""

    def site(self, kind: str, layer: int, direction: str = "fwd") -> str:
        """The record name of a grid row: resid row n_layers is the stream after the last block."""
        if kind == "resid":
            return f"blocks.{layer - 1}.resid_post" if layer == self.n_layers else f"blocks.{layer}.resid_pre"
        if kind in ("h", "c"):
            return f"rnn.{layer}.{direction}.{kind}"
        return {"attn": f"blocks.{layer}.attn_out", "mlp": f"blocks.{layer}.mlp_out",
                "heads": f"blocks.{layer}.attn.z"}[kind]

    def rows(self, kind: str) -> int:
        return self.n_layers + 1 if kind == "resid" else self.n_layers


@dataclass
class PatchedRun:
    """One batch run with patches: logits (B, V) at the last position (float32), the kept sites name -> (B, T, ...),
    and (asked for) each block's call arguments, for `resume_logits`."""

    logits: torch.Tensor
    kept: dict[str, torch.Tensor]
    calls: dict[int, BlockCall] | None = None


class PatchesBlocks:
    """The Intervenes capability of a decoder whose blocks were found (`self.patch_sites`, hooks installed at load);
    the adapter gives `_block_logits(ids (B, T)) -> (B, V)` at the last position and `unembed`."""

    patch_sites: TransformerSites | None = None
    task_head: TaskHead | None = None  # a decoder patched here is a language model: its logits are the vocabulary's

    if TYPE_CHECKING:
        @property
        def can_generate(self) -> bool: ...

    def intervention_layout(self) -> Layout | None:
        """None unless the blocks were found and the model predicts the next token (a masked LM does not)."""
        if self.patch_sites is None or not self.can_generate:
            return None
        kinds = self.patch_sites.kinds()
        missing = [w for w, k in (("attention", "attn"), ("MLP", "mlp"), ("per-head outputs", "heads"))
                   if k not in kinds]
        note = f"blocks: {self.patch_sites.n_layers}" + (f"; not found in every block: {', '.join(missing)}"
                                                   if missing else "")
        return Layout(self.patch_sites.n_layers, kinds, self.patch_sites.n_heads, ("fwd",), note)

    def _block_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> (B, V): the model's own logits at the last position (the adapter's forward)."""
        raise NotImplementedError

    if TYPE_CHECKING:
        def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor: ...

    def patched_logits(self, ids: torch.Tensor, patches: Sequence[Patch] = (), keep: Names = (),
                       calls: bool = False) -> PatchedRun:
        """ids (B, T) run with `patches`, keeping the sites `keep` (glob patterns)."""
        with scope(patches, keep, calls) as s:
            logits = self._block_logits(ids)
        return PatchedRun(logits.float(), s.kept, s.calls)

    def resume_logits(self, layer: int, hidden: torch.Tensor, patches: Sequence[Patch],
                      calls: dict[int, BlockCall]) -> torch.Tensor:
        """hidden (B, T, C) entering block `layer` (n_layers: after the last) -> (B, V) logits at the last position,
        running only blocks layer.. with `patches`, as they were called in `calls`."""
        assert self.patch_sites is not None
        with scope(patches):
            out = self.patch_sites.resume(layer, hidden, calls)
            return self.unembed(out[:, -1]).float()

    def site_gradients(self, ids: torch.Tensor, keep: Names, metric: Metric
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """ids (1, T): (metric(logits (1, V)), the kept sites' values and ∂metric/∂site, each (T, ...))."""
        with torch.enable_grad(), scope((), keep) as s:
            s.grad = True
            value = metric(self._block_logits(ids).float())
            names = list(s.kept)
            grads = torch.autograd.grad(value, [s.kept[n] for n in names], allow_unused=True)
        values = {n: s.kept[n][0].detach() for n in names}
        return value.detach(), values, {n: (g[0] if g is not None else torch.zeros_like(values[n]))
                                        for n, g in zip(names, grads)}
