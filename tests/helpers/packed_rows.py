"""The packed workload the layout tests train on every layout (issue 46): packed rows whose
documents a ``block_causal`` model keeps apart, and the same documents each run alone.

:func:`write_packed_workload` writes, once per session (the layout modules' ``run_once``):

* ``packed.pt`` -- ``preset_pt`` batches of packed rows, as transformers'
  ``DataCollatorWithFlattening`` writes them: ``position_ids`` restarting at 0 where each
  document begins, -100 on each document's first label; :data:`STEPS` steps of
  :data:`ROWS_PER_STEP` rows of :data:`SEQ_LEN` tokens, every step's rows holding
  :data:`DOCUMENTS_PER_STEP` documents (documents shorter than the convolution window, a row's
  padded tail, another layout of the rows every step);
* ``alone.pt`` -- the same documents, one a row, padded (labels -100): a causal model trains
  on each of them alone, exactly what a step's token-weighted loss over them means;
* the legacy YAMLs: ``packed.yaml`` (the tiny flavor, both layer kinds, ``attn_mask_type:
  block_causal``; 4 rows a step in micro-batches of 2), ``alone.yaml`` (the causal model on
  ``alone.pt``, a step's :data:`DOCUMENTS_PER_STEP` rows at once) and ``packed_moe.yaml`` (the
  MoE debug flavor cut to 2 layers, as ``test_moe_layouts``).

The packed run's step ``k`` trains the documents the alone run's step ``k`` trains, with the
same weights and schedule: its losses and gradient norms are the alone run's within the
bound of a packed row against its documents alone (:data:`PACKED_VS_ALONE_RTOL`), and every
layout's are the one-rank packed run's within the layouts' own bounds.
"""

from __future__ import annotations

from pathlib import Path

#: The packed workload: steps, rows a step, tokens a row.
STEPS, ROWS_PER_STEP, SEQ_LEN = 4, 4, 48
#: Each row's documents' lengths (and a padded tail: the last entry's ``pad``), cycled over the
#: rows: documents of 2 and 3 tokens (shorter than the convolution window), of 1 to 40.
ROW_LAYOUTS = (
    ((2, 19, 27), 0),
    ((30, 3, 15), 0),
    ((11, 11, 26), 0),
    ((20, 3, 20), 5),  # a padded tail (positions 0, labels -100): it stays with the last
    ((40, 2, 6), 0),
    ((7, 36, 5), 0),
    ((1, 24, 23), 0),  # a one-token document: no label of its own
)
DOCUMENTS_PER_STEP = 3 * ROWS_PER_STEP
#: A packed step against its documents alone: the losses and the gradient norms (float32; the
#: Gated DeltaNet's chunked sums start elsewhere in a packed document's chunks than in its own,
#: and the loss sums its tokens in another order). Measured over the 4 steps: losses 6.2e-8,
#: gradient norms equal; the causal model on the same packed rows misses it by 1.1e-4 (losses)
#: and 9.7e-3 (gradient norms).
PACKED_VS_ALONE_RTOL = 1e-6
IGNORE = -100
VOCAB = 2048  # the tiny and the MoE debug flavors'

_YAML = """\
model:
  name: {model}
  config_overrides: {overrides}
{layers}data:
  type: preset_pt
  train_path: {path}
  max_seq_len: {seq_len}
train:
  max_steps: {steps}
  global_batch_size: {batch}
  micro_batch_size: {micro}
  optimizer: {{lr: 1.0e-3, lr_warmup_ratio: 0.25, max_grad_norm: 100.0}}
  logging: {{log_steps: 1}}
  checkpoint: {{save_steps: 0, save_hf_weights: false}}
  debug: {{deterministic: true}}
"""


def _yaml(model: str, overrides: str, path: Path, batch: int, micro: int, *,
          layers: str = "") -> str:
    return _YAML.format(model=model, overrides=overrides, layers=layers, path=path,
                        seq_len=SEQ_LEN, steps=STEPS, batch=batch, micro=micro)


def _rows():
    """``(step, [(document lengths, pad)])`` of every step, in order."""
    layouts = [ROW_LAYOUTS[i % len(ROW_LAYOUTS)] for i in range(STEPS * ROWS_PER_STEP)]
    for layout in layouts:
        assert sum(layout[0]) + layout[1] == SEQ_LEN and len(layout[0]) == 3, layout
    return [layouts[s * ROWS_PER_STEP:(s + 1) * ROWS_PER_STEP] for s in range(STEPS)]


def write_packed_workload(folder: Path) -> dict[str, str]:
    """Write the files of the module docstring into ``folder``; their paths by name."""
    import torch

    folder.mkdir(parents=True)
    gen = torch.Generator().manual_seed(46)
    packed, alone = [], []
    for step in _rows():
        ids, labels, positions = [], [], []
        alone_ids, alone_labels = [], []
        for lengths, pad in step:
            row_ids, row_labels, row_positions = [], [], []
            for n in lengths:
                doc = torch.randint(0, VOCAB, (n,), generator=gen)
                first_ignored = doc.clone()
                first_ignored[0] = IGNORE
                row_ids.append(doc)
                row_labels.append(first_ignored)
                row_positions.append(torch.arange(n))
                alone_ids.append(torch.cat([doc, doc.new_zeros(SEQ_LEN - n)]))
                alone_labels.append(torch.cat([doc, doc.new_full((SEQ_LEN - n,), IGNORE)]))
            row_ids.append(torch.zeros(pad, dtype=torch.long))
            row_labels.append(torch.full((pad,), IGNORE))
            row_positions.append(torch.zeros(pad, dtype=torch.long))
            ids.append(torch.cat(row_ids))
            labels.append(torch.cat(row_labels))
            positions.append(torch.cat(row_positions))
        packed.append({"input_ids": torch.stack(ids), "labels": torch.stack(labels),
                       "position_ids": torch.stack(positions)})
        alone.append({"input_ids": torch.stack(alone_ids), "labels": torch.stack(alone_labels)})
    paths = {"packed.pt": folder / "packed.pt", "alone.pt": folder / "alone.pt"}
    torch.save(packed, paths["packed.pt"])
    torch.save(alone, paths["alone.pt"])
    dense = "{flavor: tiny, attn_mask_type: %s}"
    moe = "{flavor: debugmodel, full_attention_interval: 2, attn_mask_type: block_causal}"
    yamls = {
        "packed.yaml": _yaml("qwen3_5", dense % "block_causal", paths["packed.pt"],
                             ROWS_PER_STEP, 2),
        "alone.yaml": _yaml("qwen3_5", dense % "causal", paths["alone.pt"],
                            DOCUMENTS_PER_STEP, DOCUMENTS_PER_STEP),
        "packed_moe.yaml": _yaml("qwen3_5_moe", moe, paths["packed.pt"], ROWS_PER_STEP, 2,
                                 layers="  num_hidden_layers: 2\n"),
    }
    for name, text in yamls.items():
        paths[name] = folder / name
        paths[name].write_text(text)
    return {name: str(path) for name, path in paths.items()}


def packed_workload(run_once) -> dict[str, Path]:
    """The workload's files, written once per session (``run_once``: the cases' command lines,
    hence the layout harness's keys, are the same on every xdist worker)."""
    return {name: Path(p) for name, p in run_once.get("packed workload",
                                                      write_packed_workload).items()}
