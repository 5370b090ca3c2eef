"""Every name the explorer takes from transformers, imported here once, when this module is first imported.

transformers imports its classes lazily (a _LazyModule resolves `transformers.AutoModel` on first access). Two
server threads resolving different names for the first time at once (one session loading MiniLM while another
builds a decoding run's logits processors, as when a class opens the app together) can meet a half-imported
module and fail with "module 'transformers' has no attribute 'AutoModel'". Importing a module is serialised by
Python's per-module import lock, so with every use going through this module, the first thread resolves all of
them and the others wait until it is done. Models of other families are imported while loading them, one load
at a time (explorer.loading.loaders). The ~190,000 objects transformers leaves are then frozen out of the garbage
collector (explorer.runtime.heap).
"""
import contextlib
from typing import Callable, Iterable, Iterator, Mapping, Protocol, TypedDict, TypeVar, Unpack

import transformers
from transformers import (AttentionInterface, AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForSeq2SeqLM, AutoModelForSequenceClassification,
                          AutoModelForTokenClassification, AutoTokenizer, BertForMaskedLM, PreTrainedModel,
                          PreTrainedTokenizerBase)
from transformers.generation.logits_process import (
    ForcedBOSTokenLogitsProcessor, ForcedEOSTokenLogitsProcessor, LogitsProcessorList, MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor, MinPLogitsWarper, NoBadWordsLogitsProcessor, NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor, SuppressTokensAtBeginLogitsProcessor, SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, TypicalLogitsWarper)
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.models.llama.modeling_llama import eager_attention_forward as llama_eager_attention_forward

from explorer.runtime import heap

AUTO_CLASSES = {"base": AutoModel, "causal-lm": AutoModelForCausalLM, "seq2seq-lm": AutoModelForSeq2SeqLM,
                "masked-lm": AutoModelForMaskedLM, "sequence-classification": AutoModelForSequenceClassification,
                "token-classification": AutoModelForTokenClassification}

__all__ = [
    "transformers", "AttentionInterface", "AutoConfig", "AutoModel", "AutoModelForCausalLM", "AutoModelForMaskedLM",
    "AutoModelForSeq2SeqLM", "AutoModelForSequenceClassification", "AutoModelForTokenClassification",
    "AutoTokenizer", "AUTO_CLASSES", "ForcedBOSTokenLogitsProcessor",
    "ForcedEOSTokenLogitsProcessor", "LogitsProcessorList", "MinLengthLogitsProcessor",
    "MinNewTokensLengthLogitsProcessor", "MinPLogitsWarper", "NoBadWordsLogitsProcessor",
    "NoRepeatNGramLogitsProcessor", "RepetitionPenaltyLogitsProcessor", "SuppressTokensAtBeginLogitsProcessor",
    "SuppressTokensLogitsProcessor", "TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper",
    "TypicalLogitsWarper", "ALL_MASK_ATTENTION_FUNCTIONS", "AttentionMaskInterface", "llama_eager_attention_forward",
    "gguf_progress", "PreTrainedModel", "BertForMaskedLM", "PreTrainedTokenizerBase", "Tokenizer", "TokenizerOptions",
    "Encoding",
]

T = TypeVar("T")


class TokenizerOptions(TypedDict, total=False):
    """The keyword arguments the explorer passes when it calls a tokenizer on a text."""

    add_special_tokens: bool
    truncation: bool
    max_length: int
    return_offsets_mapping: bool


class Encoding(TypedDict, total=False):
    """What a tokenizer gives for one text (transformers' BatchEncoding): its ids, the segment of each id (a pair of
    texts) and, asked for, the characters (start, end) each covers."""

    input_ids: list[int]
    token_type_ids: list[int]
    offset_mapping: list[tuple[int, int]]


class Tokenizer(Protocol):
    """What the explorer calls of a Hugging Face tokenizer (transformers' PreTrainedTokenizerBase has it). Modules
    that read a tokenizer import this name for type checking only, so that reading one does not import transformers."""

    @property
    def unk_token(self) -> str | None: ...
    @property
    def unk_token_id(self) -> int | None: ...
    @property
    def all_special_ids(self) -> list[int]: ...
    @property
    def all_special_tokens(self) -> list[str]: ...

    def __call__(self, text: str | None = None, text_pair: str | None = None, *, text_target: str | None = None,
                 **options: Unpack[TokenizerOptions]) -> Encoding:
        """The ids of `text` (and `text_pair`, or of `text_target` as a decoder's target)."""
    def get_vocab(self) -> dict[str, int]:
        """piece -> id, added tokens included."""
    def get_added_vocab(self) -> dict[str, int]:
        """The tokens added to the tokenizer's own vocabulary (special and user-added ones): piece -> id."""
    def apply_chat_template(self, conversation: list[dict[str, str]], *, tokenize: bool = True,
                            add_generation_prompt: bool = False, return_dict: bool = True
                            ) -> str | list[int] | list[str] | list[list[int]] | Mapping[str, list[int]]:
        """The conversation in the model's chat template: the text (tokenize=False), or its ids (return_dict: in
        a mapping, under "input_ids")."""



@contextlib.contextmanager
def gguf_progress(report: Callable[[int, int], None]) -> Iterator[None]:
    """Within the block, transformers' GGUF reader reports (tensors done, total) to `report` instead of drawing a
    console progress bar: it iterates its tensors through `tqdm` imported in its module, which is swapped for the
    block. Used only by explorer.loading.pretrained's one-time conversion, under the load lock (one load at a time)."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    original = vars(gguf_utils)["tqdm"]  # the name the module imported (not re-exported: read from its namespace)

    def counted(items: Iterable[T], *args: object, **kwargs: object) -> Iterator[T]:  # tqdm's signature
        items = list(items)
        for i, item in enumerate(items):
            report(i, len(items))
            yield item
        report(len(items), len(items))

    vars(gguf_utils)["tqdm"] = counted
    try:
        yield
    finally:
        vars(gguf_utils)["tqdm"] = original


heap.freeze()
