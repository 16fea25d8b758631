"""A streamed run resumed from a checkpoint trains the steps the uninterrupted run trains.

The engine, in this process, on the tiny Qwen3.5 flavor at ``seq_len`` 32: ``json_file`` text
records streamed (``dataloader.streaming``) with the shuffle buffer, a budget of 6 samples an
epoch from 5 records (so an epoch reads a second pass of the stream) over 2 epochs, 2 samples a
step. The run trains 4 steps saving at step 2; a second run resumes from that checkpoint, and
its steps 3-4 -- the rest of epoch 0 and the start of epoch 1 -- must have the very losses of
the first run's, bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyper_parallel.assets import resolve_path

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


def _config(data: str, folder: Path, **checkpoint):
    from hyper_parallel.components.checkpoint import CheckpointManager
    from hyper_parallel.components.dataloader import BaseDataLoader
    from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
    from hyper_parallel.components.optimizer import OptimizersContainer
    from hyper_parallel.config.configs import ModelConfig, TrainingConfig
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return HyperTrainer.Config(
        model=ModelConfig(name="qwen3_5", config_overrides={"flavor": "tiny"}),
        training=TrainingConfig(steps=4, seq_len=32, global_batch_size=2, local_batch_size=1,
                                max_epochs=2),
        dataloader=BaseDataLoader.Config(dataset="json_file", dataset_path=data, streaming=True,
                                         max_samples=6, pin_memory=False),
        optimizer=OptimizersContainer.Config(lr=1e-3),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=1),
        checkpoint=CheckpointManager.Config(folder=str(folder), interval=2, export_hf=False,
                                            **checkpoint),
    )


def _train(config) -> list[tuple[int, int, float]]:
    trainer = config.build()
    try:
        epochs = []
        trainer.callbacks.on_step_end = _recording(trainer, epochs, trainer.callbacks.on_step_end)
        trainer.train()
        return [(step, epoch, loss) for (step, loss), epoch in
                zip(trainer.state.loss_history, epochs)]
    finally:
        trainer.close()


def _recording(trainer, epochs: list, on_step_end):
    def hook(*args, **kwargs):
        epochs.append(trainer.state.epoch)
        return on_step_end(*args, **kwargs)
    return hook


def test_resume_continues_with_the_uninterrupted_steps(tmp_path):
    lines = Path(resolve_path("pkg://corpus/valid.jsonl")).read_text().splitlines()
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps({"text": json.loads(line)["text"]}) + "\n"
                            for line in lines[:5]))
    straight = _train(_config(str(data), tmp_path / "straight"))
    assert [(step, epoch) for step, epoch, _ in straight] == [(1, 0), (2, 0), (3, 0), (4, 1)]
    assert (tmp_path / "straight" / "step_2").is_dir()
    resumed = _train(_config(str(data), tmp_path / "resumed",
                             load_path=str(tmp_path / "straight" / "step_2")))
    assert resumed == straight[2:]  # steps 3-4: the same epochs, the same losses bit for bit


def test_a_wrong_record_met_while_training_is_a_config_error_in_the_yaml_s_words(tmp_path):
    """A streamed file is read as the run goes: an Alpaca record after text records is found at
    its step, and reported as bad input (``ConfigError``: exit 2 at the entries) naming the
    legacy keys and the record."""
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    data = tmp_path / "mixed.jsonl"
    rows = [{"text": "one two three four five six"}] * 3 + [{"instruction": "x", "output": "y"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    yaml = tmp_path / "mixed.yaml"
    yaml.write_text(
        "model: {name: qwen3_5, config_overrides: {flavor: tiny}}\n"
        f"data: {{type: json_file, train_path: {data}, streaming: true, shuffle: false, "
        "max_seq_len: 32, pin_memory: false}\n"
        "train: {max_steps: 3, global_batch_size: 2, micro_batch_size: 1, "
        f"checkpoint: {{output_dir: {tmp_path / 'out'}, save_steps: 0, save_hf_weights: false}}}}\n")
    trainer = LLMTrainer(parse_args(HyperTrainerConfig, [str(yaml)]))
    try:
        with pytest.raises(ConfigError) as info:
            trainer.train()
    finally:
        trainer.close()
    message = str(info.value)
    assert message.startswith("data.train_path: "), message
    assert f"{data} record 3: no key 'text' (data.text_key) (an Alpaca record" in message
    assert trainer.state.global_step == 1  # found loading step 2 (records 2 and 3)
