"""Built-in architectures, one readable file each: rnn_lm (Elman/GRU/LSTM language model), seq2seq (encoder-decoder
with Bahdanau or Luong attention), tiny_gpt (decoder-only transformer), masked_lm (encoder with an MLM head),
word2vec (skip-gram); build (`build_model(architecture, config)`, `from_checkpoint`).

The package imports none of its modules (see tests/test_architecture.py: concurrent imports must not deadlock):
import each from its own module, e.g. `from explorer.models.tiny_gpt import GPT`.
"""
