"""The training data pipeline: tokenizer, datasets, per-rank resumable loader.

Every builder takes explicit keyword arguments (not a config object) so the legacy trainer and
any other trainer can call it. Typical use, with the legacy config fields in comments::

    tok = load_tokenizer(resolve_tokenizer_path(model.tokenizer_path, model.weights_path))
    ds = build_dataset(data.type, train_path=data.train_path, max_seq_len=data.max_seq_len,
                       text_key=data.text_key, tokenizer=tok, vocab_size=model_vocab_size,
                       num_samples=train.max_steps * train.global_batch_size,
                       subset=data.subset, template=data.template, max_samples=data.train_size)
    loader = build_dataloader(ds, dp_rank=dp_rank, dp_size=dp_size,
                              micro_batch_size=train.micro_batch_size, shuffle=data.shuffle,
                              seed=train.seed, num_workers=data.num_workers,
                              pin_memory=data.pin_memory, prefetch_factor=data.prefetch_factor,
                              collate_fn=functools.partial(collate, pad_id=tok.pad_id,
                                                           pad_to_multiple_of=cp * tp))
    accum = grad_accum_steps(train.global_batch_size, train.micro_batch_size, dp_size)
    loader.sampler.set_epoch(epoch)
    for micro_batches in micro_batch_groups(loader, accum): ...

The shipped corpus is addressed as ``pkg://corpus/train.jsonl`` (also ``valid.jsonl``,
``train.txt``).

The legacy data types beyond those (``hf_datasets``, ``json_file``, ``preset_pt``; the options
``subset``, ``template``, ``max_samples``) go through the same ``build_dataset``; each has its
own module (``hf``, ``sft``, ``preset``). ``hf`` is not imported here: it imports the
``datasets`` library on first use; nor is ``streaming`` (``data.streaming``:
``build_streaming_dataset``, this rank's share of a ``datasets`` stream, which
``build_dataloader`` batches without a sampler).
"""

from hyper_parallel.data.datasets import (
    DATA_TYPES,
    LEGACY_FIELDS,
    DummyDataset,
    PackedTextDataset,
    build_dataset,
    first_samples,
    read_jsonl_documents,
    read_text_documents,
    resolve_data_files,
)
from hyper_parallel.data.loader import (
    IGNORE_INDEX,
    ResumableDistributedSampler,
    build_dataloader,
    collate,
    grad_accum_steps,
    micro_batch_groups,
    split_rows,
    split_sequence,
)
from hyper_parallel.data.preset import PresetBatchesDataset
from hyper_parallel.data.sequences import SequenceDataset
from hyper_parallel.data.sft import build_sft_dataset, infer_seqlen, read_alpaca_records
from hyper_parallel.data.tokenizer import TextTokenizer, load_tokenizer, resolve_tokenizer_path

__all__ = [
    "DATA_TYPES",
    "IGNORE_INDEX",
    "LEGACY_FIELDS",
    "DummyDataset",
    "PackedTextDataset",
    "PresetBatchesDataset",
    "ResumableDistributedSampler",
    "SequenceDataset",
    "TextTokenizer",
    "build_dataloader",
    "build_dataset",
    "build_sft_dataset",
    "collate",
    "first_samples",
    "grad_accum_steps",
    "infer_seqlen",
    "load_tokenizer",
    "micro_batch_groups",
    "read_alpaca_records",
    "read_jsonl_documents",
    "read_text_documents",
    "resolve_data_files",
    "resolve_tokenizer_path",
    "split_rows",
    "split_sequence",
]
