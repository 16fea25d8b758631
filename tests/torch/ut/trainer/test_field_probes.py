"""Every field has an effect, proven from the field table.

Each mapping row of ``codegen/field_table.yaml`` carries a probe (a setting and the observable it
must move; see :mod:`hyper_parallel.codegen.table.probes`). For every one-rank probe this test
trains a tiny Qwen3.5 through the engine twice -- the probe's ``base`` alone, then with its ``set``
-- and asserts the observable moved; for a mapped row (``rename`` / ``transform``) the probed
configuration is also written as a legacy YAML, read by the legacy parser and trained through
``LLMTrainer``, which must observe exactly the same. The two-rank (layout) probes run in one
torchrun job (``workers/probe_worker.py``, slow).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from hyper_parallel.codegen.table.field_table import load_table
from hyper_parallel.codegen.table.probes import OBSERVABLES
from tests.helpers.torchrun import REPO, spawn_ranks

TABLE = load_table(REPO / "codegen" / "field_table.yaml", "codegen/field_table.yaml")
ROWS = {f"{row.line}:{'|'.join(row.legacy.values() or row.new.values())}": row for row in TABLE.rows}
ONE_RANK = sorted(k for k, r in ROWS.items() if r.probe.get("ranks", 1) == 1)
TWO_RANKS = sorted(k for k, r in ROWS.items() if r.probe.get("ranks", 1) == 2)
MAPPED = ("rename", "transform")
WORKER = Path(__file__).parent / "workers" / "probe_worker.py"
_NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")


# ---------------------------------------------------------------------------------- the runs
def base_config():
    """The tiny run every probe starts from: a 4-layer debug Qwen3.5 (one full-attention layer),
    synthetic tokens, 3 steps, metrics every step, outputs relative to the working directory."""
    from hyper_parallel.components.checkpoint import CheckpointManager
    from hyper_parallel.components.dataloader import BaseDataLoader
    from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
    from hyper_parallel.components.metrics import MetricsProcessor
    from hyper_parallel.components.optimizer import OptimizersContainer
    from hyper_parallel.config.configs import ModelConfig, TrainingConfig
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return HyperTrainer.Config(
        model=ModelConfig(name="qwen3_5", num_hidden_layers=4, hidden_size=64,
                          intermediate_size=128, config_overrides={"flavor": "debugmodel"}),
        training=TrainingConfig(steps=3, seq_len=16, global_batch_size=2, local_batch_size=1),
        dataloader=BaseDataLoader.Config(dataset="dummy", pin_memory=False),
        optimizer=OptimizersContainer.Config(lr=1e-3),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=1),
        checkpoint=CheckpointManager.Config(folder="out", interval=0, export_hf=False),
        metrics=MetricsProcessor.Config(log_freq=1),
    )


def apply(config: Any, settings: dict, fixtures: Any) -> Any:
    """``config`` with the probe's dotted settings (fixture names resolved), re-validated."""
    from hyper_parallel.config.recipes import revalidate

    config = copy.deepcopy(config)
    for path, value in settings.items():
        value = fixtures.resolve(value)
        *parents, leaf = path.split(".")
        owner = functools.reduce(getattr, parents, config)
        current = getattr(owner, leaf)
        if isinstance(current, tuple) and isinstance(value, list):
            value = tuple(value)
        setattr(owner, leaf, value)
    return revalidate(config)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run(build, steps: int, workdir: Path, *, keep_group: bool = False) -> dict:
    """Build a trainer with ``build()`` in ``workdir``, train ``steps`` (0: build only), observe
    everything; a build or training error is recorded, not raised. ``keep_group`` leaves the
    process group up for the next run (torchrun jobs: re-initialising it there is not
    reliable)."""
    workdir.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(workdir)
    capture = Capture()
    root = logging.getLogger("hyper_parallel")
    root.addHandler(capture)
    old_level = root.level
    root.setLevel(logging.INFO)
    trainer = None
    result: dict = {"error": None, "outcome": "ok"}
    try:
        try:
            trainer = build()
        except Exception as exc:  # noqa: BLE001 - the refusal is the observable
            result["error"] = f"{type(exc).__name__}: {exc}"
            return result
        result["determinism"] = (torch.are_deterministic_algorithms_enabled(),
                                 torch.is_deterministic_algorithms_warn_only_enabled())
        if steps:
            try:
                trainer.train()
            except Exception as exc:  # noqa: BLE001 - the outcome is the observable
                result["outcome"] = f"{type(exc).__name__}: {_NUMBER.sub('#', str(exc))}"
        result.update(observe_all(trainer, workdir))
    finally:
        if trainer is not None and not keep_group:
            trainer.close()
        torch.use_deterministic_algorithms(False)
        root.removeHandler(capture)
        root.setLevel(old_level)
        os.chdir(cwd)
    # Sorted: what is logged matters, not how a background thread interleaves with the loop.
    result["log"] = sorted(_NUMBER.sub("#", m.replace(str(workdir), "<run>"))
                           for m in capture.messages)
    return result


def _file_name(name: str) -> str:
    if "tfevents" in name:
        return "events.out.tfevents"
    if name.endswith(".pt.trace.json"):
        return name.split(".", 1)[0] + ".pt.trace.json"
    return name


def observe_all(trainer: Any, workdir: Path) -> dict:
    """Every observable of :data:`OBSERVABLES` but ``attribute`` / ``refused`` (read per probe)."""
    from hyper_parallel.models.qwen3_5.activation_checkpoint import checkpointed_layers
    from hyper_parallel.models.qwen3_5.parallelize_v2 import compiled_layers

    model, state = trainer.model, trainer.state
    # Every model part's (the stages a pipeline rank holds), which the optimizer groups hold.
    names = {id(p): n for part in trainer.model_parts for n, p in part.named_parameters()}
    metrics_file = Path(trainer.config.checkpoint.folder) / "metrics.jsonl"
    records = ([json.loads(line) for line in metrics_file.read_text().splitlines()]
               if metrics_file.is_file() else [])
    files = sorted(
        "/".join(map(_file_name, path.relative_to(workdir).parts))
        for path in workdir.rglob("*") if path.is_file()
    )
    out = {
        "loss": [loss for _, loss in state.loss_history],
        "steps": [step for step, _ in state.loss_history],
        "lr": [r["lr"] for r in records if "loss" in r],
        "requires_grad": [n for n, p in model.named_parameters() if p.requires_grad],
        "params": [(n, tuple(p.shape)) for n, p in model.named_parameters()],
        "modules": sorted({type(m).__name__ for m in model.modules()}),
        "optimizer": [
            (type(opt).__name__, [
                ({k: v for k, v in g.items() if k not in ("params", "lr")},
                 [names[id(p)] for p in g["params"]])
                for g in opt.param_groups
            ])
            for opt in trainer.optimizer
        ],
        "files": files,
        "jsonl": [(r["step"], sorted(r)) for r in records],
        "eval_loss": [r["eval_loss"] for r in records if "eval_loss" in r],
        "tensorboard": _tensorboard_steps(workdir),
        "trace_steps": _trace_steps(workdir),
        "fsdp": _fsdp_settings(model),
        "compiled": (compiled_layers(model) if hasattr(model, "model") else None,
                     trainer.loss_compiled),
        "checkpointed": [checkpointed_layers(part) for part in trainer.model_parts
                         if hasattr(part, "model")],
        "trainer": trainer,
    }
    return out


def _tensorboard_steps(workdir: Path) -> list:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps = []
    for folder in sorted({p.parent for p in workdir.rglob("*tfevents*")}):
        acc = EventAccumulator(str(folder))
        acc.Reload()
        if "train/loss" in acc.Tags()["scalars"]:
            steps.append([e.step for e in acc.Scalars("train/loss")])
    return steps


def _trace_steps(workdir: Path) -> list:
    steps = set()
    for trace in workdir.rglob("*.pt.trace.json"):
        for event in json.loads(trace.read_text()).get("traceEvents", []):
            if str(event.get("name", "")).startswith("ProfilerStep#"):
                steps.add(event["name"])
    return sorted(steps)


def _fsdp_settings(model: Any) -> list:
    """Per FSDP unit: its name, whether it reshards after forward, its mixed-precision and
    offload policies, and the units it prefetches in forward and in backward."""
    from torch.distributed.fsdp import FSDPModule

    units = [(name, module) for name, module in model.named_modules()
             if isinstance(module, FSDPModule)]
    name_of = {id(module._get_fsdp_state()): name for name, module in units}
    out = []
    for name, module in units:
        state = module._get_fsdp_state()
        group = state._fsdp_param_group
        if group is not None:
            out.append((name, group.post_forward_mesh_info is not None, repr(group.mp_policy),
                        type(group.offload_policy).__name__,
                        [name_of[id(s)] for s in state._states_to_forward_prefetch],
                        [name_of[id(s)] for s in state._states_to_backward_prefetch]))
    return out


# ---------------------------------------------------------------------------------- fixtures
class Fixtures:
    """The files and objects probe values name as ``'{name}'``, made on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: dict[str, Any] = {}

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
            name = value[1:-1]
            if name not in self._made:
                self._made[name] = getattr(self, f"make_{name}")()
            return self._made[name]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value

    def _trained(self, name: str, **settings: Any) -> Path:
        config = apply(base_config(), settings, self)
        result = run(config.build, config.training.steps, self.root / name)
        assert result["error"] is None and result["outcome"] == "ok", result
        return self.root / name

    def make_weights(self) -> str:
        """HF weights of the base model trained with another seed."""
        run_dir = self._trained("weights", **{"debug.seed": 99, "checkpoint.interval": 3,
                                              "checkpoint.export_hf": True})
        return str(run_dir / "out" / "step_3" / "hf_ckpt")

    def make_checkpoint(self) -> str:
        run_dir = self._trained("checkpoint", **{"checkpoint.interval": 2})
        return str(run_dir / "out" / "step_2")

    def make_tokenizer(self) -> str:
        """A 512-token BPE trained on the shipped corpus (other ids than the shipped one)."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        from hyper_parallel.assets import resolve_path

        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<|endoftext|>"])
        tok.train([resolve_path("pkg://corpus/train.txt")], trainer)
        folder = self.root / "tokenizer"
        folder.mkdir()
        tok.save(str(folder / "tokenizer.json"))
        return str(folder)

    def make_hf_assets(self) -> str:
        from hyper_parallel.assets import tokenizer_path

        folder = self.root / "hf_assets"
        folder.mkdir()
        shutil.copy(tokenizer_path(), folder / "tokenizer.json")
        return str(folder)

    def _jsonl(self, name: str, records: list[dict]) -> str:
        path = self.root / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(path)

    def _corpus_texts(self) -> list[str]:
        from hyper_parallel.assets import resolve_path

        lines = Path(resolve_path("pkg://corpus/valid.jsonl")).read_text().splitlines()
        return [json.loads(line)["text"] for line in lines]

    def make_two_keys_jsonl(self) -> str:
        """Records whose ``text`` and ``content`` hold different documents."""
        texts = self._corpus_texts()
        return self._jsonl("two_keys.jsonl", [{"text": a, "content": b}
                                              for a, b in zip(texts, reversed(texts))])

    def make_text_jsonl(self) -> str:
        """``json_file`` text records (``{"text": ...}``): the corpus documents, one a line."""
        return self._jsonl("text_records.jsonl", [{"text": t} for t in self._corpus_texts()])

    def make_tiny_jsonl(self, document: int = 0, name: str = "tiny.jsonl") -> str:
        """Just enough text for one step of the base run per epoch (two samples of 16 tokens)."""
        from hyper_parallel.data import build_dataset, load_tokenizer

        tok, words, kept = load_tokenizer(), self._corpus_texts()[document].split(), []
        for word in words:
            kept.append(word)
            text = " ".join(kept)
            path = self._jsonl(name, [{"text": text}])
            try:
                dataset = build_dataset("jsonl", train_path=path, max_seq_len=16, tokenizer=tok)
            except ValueError:  # fewer tokens than one sample yet
                continue
            if len(dataset) == 2:
                return path
        raise AssertionError(f"corpus document {document} is too short for two samples")

    def make_tiny_other_jsonl(self) -> str:
        """Like ``tiny_jsonl``, from another document."""
        return self.make_tiny_jsonl(document=1, name="tiny_other.jsonl")

    def make_hf_configs_folder(self) -> str:
        """A local Hugging Face dataset folder with two configurations (``first``, ``second``)
        of different documents, declared in its README the way the hub does."""
        texts = self._corpus_texts()
        folder = self.root / "hf_configs"
        folder.mkdir()
        for name, docs in (("first", texts), ("second", list(reversed(texts)))):
            (folder / f"{name}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n"
                                                          for d in docs))
        (folder / "README.md").write_text(
            "---\nconfigs:\n- config_name: first\n  data_files: first.jsonl\n"
            "- config_name: second\n  data_files: second.jsonl\n---\n")
        return str(folder)

    def make_alpaca_json(self) -> str:
        """Alpaca records (a JSON list): instruction, input, output from the corpus."""
        texts = self._corpus_texts()
        records = [{"instruction": " ".join(t.split()[:6]), "input": "",
                    "output": " ".join(t.split()[6:30])} for t in texts[:12]]
        path = self.root / "alpaca.json"
        path.write_text(json.dumps(records))
        return str(path)

    def make_spec_tiny_lm(self) -> Any:
        from hyper_parallel.protocols.model_spec import ModelSpec
        from tests.torch.ut.trainer.test_trainer_config_build import TinyLM

        return ModelSpec(name="tiny_lm", model=TinyLM.Config(), parallelize_fn=lambda m, *a, **k: m)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> Fixtures:
    return Fixtures(tmp_path_factory.mktemp("probe_fixtures"))


_BASES: dict[str, dict] = {}


def base_run(config: Any, steps: int, fixtures: Fixtures) -> dict:
    """The engine run of a probe's base, shared by the probes with the same base (most have
    none); the trainer is kept for ``attribute`` probes."""
    key = f"{steps}:{config!r}"
    if key not in _BASES:
        _BASES[key] = engine_run(config, steps, fixtures.root / "bases" / str(len(_BASES)))
    return _BASES[key]


def observed(result: dict, probe: dict) -> Any:
    if probe["observe"] == "refused":
        return result["error"]
    if result["error"] is not None:
        pytest.fail(f"the run failed to build: {result['error']}")
    if probe["observe"] == "attribute":
        return functools.reduce(getattr, probe["path"].split("."), result["trainer"])
    return result[probe["observe"]]


def engine_run(config: Any, steps: int, workdir: Path, **kw: Any) -> dict:
    return run(config.build, steps, workdir, **kw)


def legacy_run(config: Any, steps: int, workdir: Path, env: dict | None = None,
               **kw: Any) -> dict:
    """The same configuration written as a legacy YAML, parsed and trained by LLMTrainer."""
    from hyper_parallel.codegen.migration.to_yaml import config_yaml
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    text = config_yaml(config, "the probe")
    path = workdir.with_suffix(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        args = parse_args(HyperTrainerConfig, [str(path)])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return run(lambda: LLMTrainer(args), steps, workdir, **kw)


def legacy_refusal(row: Any, probe: dict, workdir: Path) -> str | None:
    """An ``unsupported`` row: its legacy key set off the default is refused on conversion."""
    import yaml

    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args

    tree: dict = {"model": {"name": "qwen3_5"}}
    for path, value in probe["set"].items():
        *parents, leaf = path.split(".")
        functools.reduce(lambda d, k: d.setdefault(k, {}), parents, tree)[leaf] = value
    path = workdir.with_suffix(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(tree))
    try:
        legacy_to_trainer_config(parse_args(HyperTrainerConfig, [str(path)]))
    except ConfigError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------------------------- the tests
def test_every_row_has_a_probe_and_every_observable_is_implemented():
    assert len(ROWS) == len(TABLE.rows) and all(r.probe for r in TABLE.rows)
    used = {r.probe["observe"] for r in TABLE.rows}
    assert used <= set(OBSERVABLES), used - set(OBSERVABLES)
    assert set(OBSERVABLES) - used - {"mesh"} == set(), "an observable no probe uses"


@pytest.mark.slow
@pytest.mark.parametrize("key", ONE_RANK)
def test_probe_moves_its_observable(key, fixtures, tmp_path):
    row = ROWS[key]
    probe = row.probe
    steps = probe.get("steps", 3)
    if row.kind == "unsupported":
        message = legacy_refusal(row, probe, tmp_path / "legacy")
        assert message is not None and probe["expect"] in message, message
        return
    base = apply(base_config(), probe.get("base", {}), fixtures)
    before = observed(base_run(base, steps, fixtures), probe)
    try:
        probed = apply(base, probe["set"], fixtures)
    except ValueError as exc:  # refused by the Config itself, before any build
        assert probe["observe"] == "refused" and probe["expect"] in str(exc), exc
        return
    after = observed(engine_run(probed, steps, tmp_path / "probe"), probe)
    if probe["observe"] == "refused":
        assert before is None, f"the base run failed: {before}"
        assert after is not None and probe["expect"] in after, after
    else:
        assert after != before, f"{key}: {probe['observe']} did not move: {before!r}"
    if row.kind in MAPPED:
        env = {"LOCAL_RANK": str(probed.comm.local_rank)} if "comm.local_rank" in probe["set"] else None
        if env:  # not a YAML key in either world: the launcher's LOCAL_RANK fills it
            probed = apply(probed, {"comm.local_rank": 0}, fixtures)
        legacy = observed(legacy_run(probed, steps, tmp_path / "legacy", env), probe)
        if probe["observe"] == "refused" and legacy not in (None, after) and after is not None:
            # The same refusal, in each entry's own field names (the legacy front door names
            # the legacy key and adds the recipe field).
            legacy_keys = set(row.legacy.values())
            assert probe["expect"] in legacy and any(k in legacy for k in legacy_keys), (
                f"{key}: the legacy YAML observes {legacy!r}, the engine {after!r}"
            )
        else:
            assert legacy == after, f"{key}: the legacy YAML observes {legacy!r}, the engine {after!r}"


@pytest.mark.slow
def test_layout_probes_on_two_ranks(tmp_path):
    out = tmp_path / "layout.json"
    spawn_ranks(WORKER, [str(out), *TWO_RANKS], nproc=2, timeout=600)
    results = json.loads(out.read_text())
    assert sorted(results) == TWO_RANKS
    for key, result in results.items():
        assert result["probe"] != result["base"], f"{key}: its observable did not move"
        if ROWS[key].kind in MAPPED:
            assert result["legacy"] == result["probe"], key
