"""explorer.adapters.lrp against lxt 2.1's own AttnLRP rule functions, on tiny random Llama and GPT-2 models.

    python bench/check_lxt.py [--seeds 3]

lxt (PyPI `lxt`, the AttnLRP authors' library) does not install beside this app: it requires torchvision,
open_clip_torch and bitsandbytes, and its attention patch replaces transformers' attention registry with a dict,
which transformers 5 no longer takes. Its rule functions themselves import only torch, so this script downloads
lxt's sdist from the package index (pip download, no install), imports its `efficient/rules.py` and
`efficient/patches.py`, patches the models as `lxt.efficient.monkey_patch` does (its attention wrapper applied to
transformers 5's `eager_attention_forward` instead of the registry) and compares the input relevance with
`explorer.adapters.lrp.lrp` on the same model and input. tests/test_lrp.py checks the same rules written out by hand.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import torch
import transformers as T

from explorer.adapters.lrp import lrp


def _lxt(folder: Path) -> tuple[ModuleType, ModuleType]:
    """lxt 2.1's efficient/rules.py and efficient/patches.py, from its sdist (downloaded, not installed)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "lxt==2.1", "-d",
                    str(folder), "-q"], check=True)
    with tarfile.open(next(folder.glob("lxt-2.1*.tar.gz"))) as tar:
        tar.extractall(folder, filter="data")
    src = next(folder.glob("lxt-2.1*/lxt/efficient"))
    modules = []
    for name in ("rules", "patches"):
        spec = importlib.util.spec_from_file_location(f"lxt.efficient.{name}", src / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"lxt.efficient.{name}"] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return modules[0], modules[1]


def compare(family: str, seed: int, rules: ModuleType, patches: ModuleType) -> tuple[float, float]:
    """(max |ours − lxt's| relevance, max |relevance|) for one random model of `family` ("llama" or "gpt2")."""
    torch.manual_seed(seed)
    if family == "llama":
        from transformers.models.llama import modeling_llama as mod
        cfg = T.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                            num_attention_heads=4, num_key_value_heads=2)
        cfg._attn_implementation = "eager"
        model: torch.nn.Module = T.LlamaForCausalLM(cfg).eval()
    else:
        from transformers.models.gpt2 import modeling_gpt2 as mod
        cfg = T.GPT2Config(vocab_size=64, n_embd=64, n_layer=3, n_head=4)
        cfg._attn_implementation = "eager"
        model = T.GPT2LMHeadModel(cfg).eval()
        with torch.no_grad():  # biases away from zero, so that what they absorb matters
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.normal_(0, 0.05)
    E = model.get_input_embeddings()(torch.randint(0, 64, (1, 9))).detach()
    ours = lrp(lambda x: model(inputs_embeds=x).logits[:, -1, 5], E, model).relevance[0]
    saved = {"mlp": (mod.LlamaMLP if family == "llama" else mod.GPT2MLP).forward,
             "norm": (mod.LlamaRMSNorm if family == "llama" else torch.nn.LayerNorm).forward,
             "attention": mod.eager_attention_forward}
    try:
        if family == "llama":
            patches.patch_method(patches.gated_mlp_forward, mod.LlamaMLP)
            patches.patch_method(patches.rms_norm_forward, mod.LlamaRMSNorm)
        else:
            def mlp_forward(self: torch.nn.Module, h: torch.Tensor) -> torch.Tensor:  # lxt.efficient.models.gpt2's
                return self.c_proj(rules.identity_rule_implicit(self.act, self.c_fc(h)))
            patches.patch_method(mlp_forward, mod.GPT2MLP)
            patches.patch_method(patches.layer_norm_forward, torch.nn.LayerNorm)
        mod.eager_attention_forward = patches.wrap_attention_forward(saved["attention"])
        x = E.clone().requires_grad_(True)
        model(inputs_embeds=x).logits[0, -1, 5].backward()
        theirs = (x * x.grad).sum(-1)[0].detach().double().numpy()
    finally:
        (mod.LlamaMLP if family == "llama" else mod.GPT2MLP).forward = saved["mlp"]
        (mod.LlamaRMSNorm if family == "llama" else torch.nn.LayerNorm).forward = saved["norm"]
        mod.eager_attention_forward = saved["attention"]
    return float(abs(ours - theirs).max()), float(abs(theirs).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rules, patches = _lxt(Path(tmp))
        print("| model | seed | max abs difference | max abs relevance |\n|---|---|---|---|")
        for family in ("llama", "gpt2"):
            for seed in range(args.seeds):
                diff, peak = compare(family, seed, rules, patches)
                print(f"| tiny {family} | {seed} | {diff:.1e} | {peak:.3g} |")


if __name__ == "__main__":
    main()
