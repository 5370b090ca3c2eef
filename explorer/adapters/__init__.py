"""One adapter per model family, attached to a model once when it is loaded (explorer.loading.loaders).

`explorer.adapters.family.adapter_for(loaded)` is the one place that decides a model's family: every view reads the
model through `loaded.adapter` (see explorer.adapters.base for the interface and the record's names).
"""
