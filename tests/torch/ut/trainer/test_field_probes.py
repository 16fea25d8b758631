"""Every field has an effect, proven from the field table.

Each mapping row of ``codegen/field_table.yaml`` carries a probe (a setting and the observable it
must move; see :mod:`hyper_parallel.codegen.table.probes`). For every one-rank probe this test
trains a tiny Qwen3.5 through the engine twice -- the probe's ``base`` alone, then with its ``set``
-- and asserts the observable moved; for a mapped row (``rename`` / ``transform``) the probed
configuration is also written as a legacy YAML and read by the legacy parser, which must give the
same run: the very configuration, field for field (``LLMTrainer`` trains what ``HyperTrainer``
trains over the configuration its YAML converts to, every observable:
:func:`test_a_legacy_yaml_trains_the_configuration_it_converts_to`), else -- and for a probe that
observes a refusal or an outcome, which the legacy front door words in its own names -- trained
through ``LLMTrainer`` and observing exactly the same. A run two probes observe (a common base)
is trained once. The two-rank (layout) probes run in one torchrun job
(``workers/probe_worker.py``, slow).

A probe cannot pass by accident: every run it observes must build and train to its end, since a
crash "moves" almost any observable (a shorter loss list, a missing file). Only a probe that
observes a failure names it: ``refused`` (a ``ConfigError`` holding ``expect`` that stops the
build or the training) and ``outcome`` (training ends with an error holding ``expect``); any
other failure fails the probe (:func:`observed`). And an observable is what the setting does --
what torch built or ran, what the run wrote -- never the configured value read back.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
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
    everything; a build or training error is recorded, not raised (:func:`observed` decides
    whether the probe expected it). ``keep_group`` leaves the process group up for the next run
    (torchrun jobs: re-initialising it there is not reliable)."""
    import torch.distributed as dist

    from hyper_parallel.utils.errors import ConfigError

    if not keep_group and dist.is_initialized():
        # A group left by an earlier build that failed (here or in another test of this
        # process) would be joined, with its backend and timeouts: a run starts without one,
        # as a launched job does.
        dist.destroy_process_group()
    workdir.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(workdir)
    # The objects of the process so far (the suite's: millions) out of the collector's reach
    # while the run builds and trains: a full collection of the run (debug.gc_steps collects
    # every step) then walks the run's objects alone, not the suite's each time.
    gc.freeze()
    capture = Capture()
    root = logging.getLogger("hyper_parallel")
    root.addHandler(capture)
    old_level = root.level
    root.setLevel(logging.INFO)
    trainer = None
    counters = None
    result: dict = {"error": None, "refusal": False, "outcome": "ok"}
    try:
        try:
            trainer = build()
        except Exception as exc:  # noqa: BLE001 - observed() decides whether it was expected
            result["error"] = f"{type(exc).__name__}: {exc}"
            # A refusal is the engine's ConfigError; any other exception is a crash, which no
            # probe may count as its observable.
            result["refusal"] = isinstance(exc, ConfigError)
            return result
        result["determinism"] = (torch.are_deterministic_algorithms_enabled(),
                                 torch.is_deterministic_algorithms_warn_only_enabled())
        counters = Counters(trainer)
        if steps:
            try:
                with counters.collectives():
                    trainer.train()
            except Exception as exc:  # noqa: BLE001 - observed() decides whether it was expected
                result["outcome"] = f"{type(exc).__name__}: {_NUMBER.sub('#', str(exc))}"
                # Some settings are refused only where they are first used (a kernel choice,
                # in the first forward): still the engine's ConfigError, not a crash.
                result["refusal"] = isinstance(exc, ConfigError)
        result.update(observe_all(trainer, workdir))
        result.update(counters.observed())
    finally:
        if counters is not None:
            counters.remove()
        if not keep_group and trainer is not None:
            trainer.close()
        elif not keep_group and dist.is_initialized():  # a build that failed after joining
            dist.destroy_process_group()
        torch.use_deterministic_algorithms(False)
        root.removeHandler(capture)
        root.setLevel(old_level)
        os.chdir(cwd)
        gc.unfreeze()
    # Sorted: what is logged matters, not how a background thread interleaves with the loop.
    result["log"] = sorted(_NUMBER.sub("#", m.replace(str(workdir), "<run>"))
                           for m in capture.messages)
    return result


#: The functional collectives ``collectives`` counts (context parallelism's exchanges go through
#: the autograd ones; the others are counted so that a form using them is seen too).
FUNCTIONAL_COLLECTIVES = ("all_to_all_single_autograd", "all_gather_single_autograd",
                          "all_to_all_single", "all_gather_tensor", "reduce_scatter_tensor",
                          "all_reduce")


#: The torch.distributed reduce-scatters ``fsdp_reductions`` counts: FSDP2 reduces each unit's
#: gradients with one of them (``dist.<name>``, looked up at call time).
REDUCE_SCATTERS = ("reduce_scatter_single", "reduce_scatter_tensor")


class Counters:
    """What a trainer's model parts do while it trains: the rows of every forward call
    (``forwards``), the functional collectives issued (``collectives``) and the
    reduce-scatters of gradients (``fsdp_reductions``); counted by hooks and wrappers, not
    read from any setting."""

    def __init__(self, trainer: Any) -> None:
        self.forwards: list[list[int | None]] = [[] for _ in trainer.model_parts]
        self.calls: dict[str, int] = {}
        self.reduce_scatters = 0
        self._handles = [
            part.register_forward_pre_hook(functools.partial(self._forward, i), with_kwargs=True)
            for i, part in enumerate(trainer.model_parts)
        ]

    def _forward(self, index: int, module: Any, args: tuple, kwargs: dict) -> None:
        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        self.forwards[index].append(None if first is None else int(first.shape[0]))

    @contextlib.contextmanager
    def collectives(self):
        """Count every :data:`FUNCTIONAL_COLLECTIVES` call meanwhile (the module's attributes
        are wrapped, so callers that look them up at call time, as ``funcol.<name>``, are
        seen)."""
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        originals = {name: getattr(funcol, name) for name in FUNCTIONAL_COLLECTIVES
                     if hasattr(funcol, name)}

        def counted(name: str, fn: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] = self.calls.get(name, 0) + 1
                return fn(*args, **kwargs)
            return call

        def reduce_scatter(fn: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                self.reduce_scatters += 1
                return fn(*args, **kwargs)
            return call

        c10d = {name: getattr(dist, name) for name in REDUCE_SCATTERS if hasattr(dist, name)}
        for name, fn in originals.items():
            setattr(funcol, name, counted(name, fn))
        for name, fn in c10d.items():
            setattr(dist, name, reduce_scatter(fn))
        try:
            yield
        finally:
            for name, fn in originals.items():
                setattr(funcol, name, fn)
            for name, fn in c10d.items():
                setattr(dist, name, fn)

    def observed(self) -> dict:
        return {"forwards": self.forwards, "collectives": sorted(self.calls.items()),
                "fsdp_reductions": self.reduce_scatters}

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


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
        "mesh": [trainer.parallel_dims.summary(),
                 [(name, str(getattr(p, "placements", None)))
                  for name, p in list(model.named_parameters())[:4]],
                 [loss for _, loss in state.loss_history]],
        "backend": _backend(),
        "schedule": _schedule(trainer),
        "stages": _stages(trainer),
        "flops_per_token": [round(r["tflops"] * 1e12 / r["tokens_per_sec"])
                            for r in records if "tflops" in r],
        "trainer": trainer,
    }
    return out


def _backend() -> list:
    """The job's default process group as torch holds it: per device type, the class of the
    backend that runs its collectives (read from the running group, not from comm.backend)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return []
    group = dist.distributed_c10d._get_default_group()
    return sorted((device.type, type(group._get_backend(device)).__name__)
                  for device in group._device_types)


def _schedule(trainer: Any) -> list | None:
    """The pipeline schedule torch built: its class, the micro-batches it splits a step into
    and the stages it drives on this rank (None without pipeline parallelism)."""
    pipeline = getattr(trainer, "pipeline", None)
    if pipeline is None:
        return None
    schedule = pipeline.schedule
    stages = getattr(schedule, "_stages", None) or [schedule._stage]
    return [type(schedule).__name__, schedule._n_microbatches,
            [stage.stage_index for stage in stages]]


def _stages(trainer: Any) -> list | None:
    """The pipeline units each of this rank's stage modules holds (the modules that own its
    parameters: the embedding, each decoder layer, the norm, the head), in stage order; None
    without pipeline parallelism."""
    if getattr(trainer, "pipeline", None) is None:
        return None
    held = []
    for part in trainer.model_parts:
        names = [n for n, _ in part.named_parameters(remove_duplicate=False)]
        units = part.pipeline_units()
        held.append([u for u in units if any(n.startswith(u + ".") for n in names)])
    return held


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

    def make_checkpoint_folder(self) -> str:
        """The folder holding ``{checkpoint}`` (its newest complete checkpoint)."""
        return str(Path(self.resolve("{checkpoint}")).parent)

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

    def make_vl_two_chats_jsonl(self) -> str:
        """Image-text chat records of the shipped demo corpus, each holding two chats
        (``messages`` and ``conversation``: another record's) and two images (``image`` and
        ``picture``: another record's), so each key moves what is trained."""
        from hyper_parallel.assets import resolve_path

        source = Path(resolve_path("pkg://vl_corpus/train.jsonl"))
        records = [json.loads(line) for line in source.read_text().splitlines()]
        records = [r for r in records if isinstance(r.get("image"), str)][:8]
        out = []
        for record, other in zip(records, records[1:] + records[:1]):
            out.append({"messages": record["messages"], "conversation": other["messages"],
                        "image": str(source.parent / record["image"]),
                        "picture": str(source.parent / other["image"])})
        return self._jsonl("vl_two_chats.jsonl", out)

    def make_vl_processor_folder(self) -> str:
        """The demo corpus's image processor with another normalisation."""
        from hyper_parallel.assets import resolve_path

        settings = json.loads(Path(resolve_path("pkg://vl_corpus/preprocessor_config.json"))
                              .read_text())
        settings["image_mean"] = [0.2, 0.4, 0.6]
        folder = self.root / "vl_processor"
        folder.mkdir()
        (folder / "preprocessor_config.json").write_text(json.dumps(settings))
        return str(folder)

    def make_packed_preset(self) -> str:
        """``preset_pt`` batches of packed rows: 16 tokens holding three documents each
        (positions restarting at 0, each document's first label ignored, as transformers'
        DataCollatorWithFlattening writes them), enough rows for the base run's steps."""
        lengths = (5, 6, 5)
        ids = torch.randint(0, 2048, (6, sum(lengths)), generator=torch.Generator().manual_seed(7))
        positions = torch.cat([torch.arange(n) for n in lengths]).expand(6, -1).clone()
        labels = ids.masked_fill(positions == 0, -100)
        path = self.root / "packed_preset.pt"
        torch.save([{"input_ids": ids, "labels": labels, "position_ids": positions}], path)
        return str(path)

    def make_spec_tiny_lm(self) -> Any:
        from hyper_parallel.protocols.model_spec import ModelSpec
        from tests.torch.ut.trainer.test_trainer_config_build import TinyLM

        return ModelSpec(name="tiny_lm", model=TinyLM.Config(), parallelize_fn=lambda m, *a, **k: m)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> Fixtures:
    return Fixtures(tmp_path_factory.mktemp("probe_fixtures"))


_BASES: dict[str, dict] = {}

#: The settings of every one-rank probe's base. A probed run with the same settings (its base's
#: and its own) is probably another probe's base: it is kept for that probe (:func:`base_run`).
BASE_SETTINGS = {json.dumps(ROWS[k].probe.get("base", {}), sort_keys=True) for k in ONE_RANK}


def base_run(config: Any, steps: int, fixtures: Fixtures, workdir: Path | None = None,
             keep: bool = True) -> dict:
    """The engine run of ``config`` (in ``workdir``), shared by the probes whose base or probed
    run it is (most bases are none; a probed run that is another probe's base is run once when
    both probes run in this process); the trainer is kept for ``attribute`` probes. ``keep``:
    keep it for later probes (a run no later probe can share is not kept)."""
    key = f"{steps}:{config!r}"
    if key in _BASES:
        return _BASES[key]
    result = engine_run(config, steps, workdir or fixtures.root / "bases" / str(len(_BASES)))
    if keep:
        _BASES[key] = result
    return result


class ProbeRunFailed(AssertionError):
    """A run a probe observes went wrong in a way the probe does not observe (a crash, a build
    failure, a refusal that is no ConfigError): the probe fails, whatever its observable did."""


def observed(result: dict, probe: dict, run: str = "the run") -> Any:
    """The probe's observable of ``result``; raises :class:`ProbeRunFailed` unless the run went
    as the probe expects. Every probe but ``refused`` / ``outcome`` needs a run that built and
    trained to its end: a crash moves nearly every observable (fewer losses, no files), so it
    must never count. ``refused`` observes the ``ConfigError`` that stopped the build or the
    training (None when the run built and trained), any other exception failing it;
    ``outcome`` the error training ended with (``ok`` when none), a failed build failing it."""
    kind = probe["observe"]
    if kind == "refused":
        failure = result["error"] or (None if result["outcome"] == "ok" else result["outcome"])
        if failure is not None and not result["refusal"]:
            raise ProbeRunFailed(f"{run} crashed instead of refusing: {failure}")
        return failure
    if result["error"] is not None:
        raise ProbeRunFailed(f"{run} failed to build: {result['error']}")
    if kind == "outcome":
        return result["outcome"]
    if result["outcome"] != "ok":
        raise ProbeRunFailed(f"{run} failed while training: {result['outcome']}")
    if kind == "attribute":
        return functools.reduce(getattr, probe["path"].split("."), result["trainer"])
    return result[kind]


def check_moved(key: str, probe: dict, before: Any, after: Any) -> None:
    """The probed observation against the base's: a refusal / an outcome must be the one the
    probe names (and the base must have none); any other observable must differ."""
    kind = probe["observe"]
    if kind == "refused":
        assert before is None, f"{key}: the base run was refused: {before}"
        assert after is not None and probe["expect"] in after, f"{key}: {after!r}"
    elif kind == "outcome":
        assert before == "ok", f"{key}: the base run's training failed: {before}"
        assert probe["expect"] in after, f"{key}: {after!r}"
    else:
        assert after != before, f"{key}: {kind} did not move: {before!r}"


def engine_run(config: Any, steps: int, workdir: Path, **kw: Any) -> dict:
    return run(config.build, steps, workdir, **kw)


def legacy_run(config: Any, steps: int, workdir: Path, env: dict | None = None,
               **kw: Any) -> dict:
    """The same configuration written as a legacy YAML, parsed and trained by LLMTrainer."""
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    args = legacy_args(config, workdir, env)
    return run(lambda: LLMTrainer(args), steps, workdir, **kw)


def legacy_is_the_engine_run(config: Any, probe: dict, workdir: Path, env: dict | None = None,
                             trained: Any = None) -> bool:
    """Whether :func:`legacy_run` of ``config`` trains the engine's run of ``trained`` (default
    ``config``) itself: its legacy YAML converts to ``trained``, every field equal, and the
    probe observes no error. ``LLMTrainer`` is ``HyperTrainer`` over the configuration its YAML converts to
    (:func:`test_a_legacy_yaml_trains_the_configuration_it_converts_to` holds it, every
    observable) but for the legacy names its errors speak, which the ``refused`` and
    ``outcome`` probes' legacy runs still observe."""
    from hyper_parallel.codegen.table.probes import EXPECTING_OBSERVABLES
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.trainer.hyper_trainer import LOCAL_RANK_ENV

    if probe["observe"] in EXPECTING_OBSERVABLES:
        return False
    try:
        converted = legacy_to_trainer_config(legacy_args(config, workdir, env))
    except Exception:  # noqa: BLE001 - the legacy run records the failure as the probe's
        return False

    def as_built(config: Any) -> Any:
        # Under a launcher the build takes comm.local_rank from its LOCAL_RANK, whatever the
        # configuration holds (HyperTrainer._setup); the legacy parse fills it from there too.
        config = copy.deepcopy(config)
        if LOCAL_RANK_ENV in os.environ:
            config.comm.local_rank = int(os.environ[LOCAL_RANK_ENV])
        return config

    return as_built(converted) == as_built(config if trained is None else trained)


def legacy_args(config: Any, workdir: Path, env: dict | None = None) -> Any:
    """``config`` written as a legacy YAML (``workdir`` + ``.yaml``) and parsed by the legacy
    front door (``env`` set meanwhile): the ``HyperTrainerConfig`` LLMTrainer takes."""
    from hyper_parallel.codegen.migration.to_yaml import config_yaml
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

    text = config_yaml(config, "the probe")
    path = workdir.with_suffix(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return parse_args(HyperTrainerConfig, [str(path)])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    check_one_rank_probe(key, ROWS[key], fixtures, tmp_path)


def check_one_rank_probe(key: str, row: Any, fixtures: Fixtures, tmp_path: Path) -> None:
    """The base run, the probed run (and, for a mapped row, the probed run through the legacy
    YAML), each observed by :func:`observed`; the probed observable must move."""
    probe = row.probe
    steps = probe.get("steps", 3)
    if row.kind == "unsupported":
        message = legacy_refusal(row, probe, tmp_path / "legacy")
        assert message is not None and probe["expect"] in message, message
        return
    base = apply(base_config(), probe.get("base", {}), fixtures)
    before = observed(base_run(base, steps, fixtures), probe, "the base run")
    try:
        probed = apply(base, probe["set"], fixtures)
    except ValueError as exc:  # refused by the Config itself, before any build
        assert probe["observe"] == "refused" and probe["expect"] in str(exc), exc
        return
    settings = json.dumps({**probe.get("base", {}), **probe["set"]}, sort_keys=True)
    after = observed(base_run(probed, steps, fixtures, tmp_path / "probe",
                              keep=settings in BASE_SETTINGS), probe, "the probed run")
    check_moved(key, probe, before, after)
    if row.kind in MAPPED:
        env = {"LOCAL_RANK": str(probed.comm.local_rank)} if "comm.local_rank" in probe["set"] else None
        trained = probed
        if env:  # not a YAML key in either world: the launcher's LOCAL_RANK fills it
            probed = apply(probed, {"comm.local_rank": 0}, fixtures)
        if legacy_is_the_engine_run(probed, probe, tmp_path / "legacy", env, trained):
            return  # the YAML trains the probed configuration itself: it observes ``after``
        legacy = observed(legacy_run(probed, steps, tmp_path / "legacy", env), probe,
                          "the probed run through the legacy YAML")
        if probe["observe"] == "refused" and legacy not in (None, after) and after is not None:
            # The same refusal, in each entry's own field names (the legacy front door names
            # the legacy key and adds the recipe field).
            legacy_keys = set(row.legacy.values())
            assert probe["expect"] in legacy and any(k in legacy for k in legacy_keys), (
                f"{key}: the legacy YAML observes {legacy!r}, the engine {after!r}"
            )
        else:
            assert legacy == after, f"{key}: the legacy YAML observes {legacy!r}, the engine {after!r}"


#: The probe of the ``model.config_overrides`` row from before that row also owned
#: ``model.attn_mask_type`` (the legacy schema sets it in config_overrides); the row's own probe
#: now sets the mask, so this one runs here, on the same row.
CONFIG_OVERRIDES_PROBE = {"observe": "params", "set": {"model.config_overrides": {
    "flavor": "debugmodel", "num_hidden_layers": 2, "full_attention_interval": 2,
    "linear_value_head_dim": 16}}}


@pytest.mark.slow
def test_config_overrides_moves_the_parameters(fixtures, tmp_path):
    row = next(r for r in TABLE.rows if "model.config_overrides" in r.new.values())
    assert row.kind in MAPPED
    probed = copy.copy(row)
    probed.probe = CONFIG_OVERRIDES_PROBE
    check_one_rank_probe("model.config_overrides", probed, fixtures, tmp_path)


def test_a_legacy_yaml_trains_the_configuration_it_converts_to(fixtures, tmp_path):
    """What lets a mapped probe whose legacy YAML converts to the probed configuration itself
    take the engine run's observation for the legacy one (:func:`legacy_is_the_engine_run`):
    LLMTrainer over a legacy YAML trains what HyperTrainer trains over the configuration the
    YAML converts to, every observable equal."""
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    config = apply(base_config(), {"checkpoint.interval": 2, "optimizer.lr": 2e-3,
                                   "metrics.enable_tensorboard": True}, fixtures)
    converted = legacy_to_trainer_config(legacy_args(config, tmp_path / "legacy"))
    assert converted == config
    assert legacy_is_the_engine_run(config, {"observe": "loss"}, tmp_path / "legacy")
    legacy = legacy_run(config, 3, tmp_path / "legacy")
    engine = engine_run(converted, 3, tmp_path / "engine")
    assert legacy.pop("error") is engine.pop("error") is None
    assert isinstance(legacy.pop("trainer"), LLMTrainer) and engine.pop("trainer")
    assert legacy == engine


@pytest.mark.slow
def test_layout_probes_on_two_ranks(tmp_path):
    out = tmp_path / "layout.json"
    spawn_ranks(WORKER, [str(out), *TWO_RANKS], nproc=2, timeout=600)
    results = json.loads(out.read_text())
    assert sorted(results) == TWO_RANKS
    problems = [p for key, entry in results.items() for p in layout_problems(key, ROWS[key], entry)]
    assert not problems, "\n".join(problems)


def layout_problems(key: str, row: Any, entry: dict) -> list[str]:
    """What is wrong with one two-rank probe's runs (``workers/probe_worker.py`` writes each
    run as ``{"observed": ..., "failure": ...}``): a run that failed where the probe observes no
    failure, an observable that did not move, a legacy YAML that observes something else."""
    failures = [f"{key}: {run}: {e['failure']}" for run, e in entry.items() if e["failure"]]
    if failures:  # a failed run has no observation to compare: it is the problem
        return failures
    try:
        check_moved(key, row.probe, entry["base"]["observed"], entry["probe"]["observed"])
    except AssertionError as exc:
        return [str(exc)]
    if row.kind in MAPPED and entry["legacy"]["observed"] != entry["probe"]["observed"]:
        return [(f"{key}: the legacy YAML observes {entry['legacy']['observed']!r}, "
                 f"the engine {entry['probe']['observed']!r}")]
    return []


# ------------------------------------------------------------------ the machinery cannot pass
# What the probes above rest on: a failed run never counts as a moved observable. Each test
# feeds the machinery a run that fails and checks that the probe fails with that failure.
class _Row:
    """A table row for the machinery tests (kind, probe, no legacy counterpart)."""

    def __init__(self, probe: dict, kind: str = "new_only") -> None:
        self.kind, self.probe, self.legacy, self.new = kind, probe, {}, {}


def _crash_at_build(exc: Exception):
    def build():
        raise exc
    return build


@pytest.mark.slow
def test_a_probe_whose_run_crashes_fails(fixtures, tmp_path, monkeypatch):
    # NaN from the second step on, and check_nan_inf turns it into an error: the probed run
    # crashes after one step, so its losses are fewer than the base's -- "moved".
    row = _Row({"observe": "loss", "set": {"optimizer.lr": 1.0e30, "training.max_norm": 0.0,
                                           "debug.check_nan_inf": True}})
    runs: list[dict] = []
    real_engine_run = engine_run

    def recording(*args: Any, **kw: Any) -> dict:
        runs.append(real_engine_run(*args, **kw))
        return runs[-1]

    monkeypatch.setitem(globals(), "engine_run", recording)
    with pytest.raises(ProbeRunFailed, match="the probed run failed while training: "
                                             "RuntimeError: non-finite"):
        check_one_rank_probe("crash", row, fixtures, tmp_path)
    crashed = runs[-1]
    base = observed(base_run(base_config(), 3, fixtures), row.probe)
    assert crashed["loss"] != base, "the crash must move the loss, or this test proves nothing"


def test_a_run_that_fails_to_build_is_no_observation(tmp_path):
    result = run(_crash_at_build(RuntimeError("no such kernel")), 3, tmp_path / "run")
    for kind in ("loss", "params", "log", "outcome", "attribute"):
        with pytest.raises(ProbeRunFailed, match="failed to build: RuntimeError: no such kernel"):
            observed(result, {"observe": kind, "path": "model"})


def test_a_refusal_is_a_config_error_not_any_crash(tmp_path):
    from hyper_parallel.utils.errors import ConfigError

    probe = {"observe": "refused", "expect": "text-only"}
    crash = run(_crash_at_build(RuntimeError("text-only, and a crash")), 0, tmp_path / "crash")
    with pytest.raises(ProbeRunFailed, match="crashed instead of refusing"):
        observed(crash, probe)
    refusal = run(_crash_at_build(ConfigError("text-only models", path="data.image_key")), 0,
                  tmp_path / "refusal")
    assert "text-only" in observed(refusal, probe)


def test_an_outcome_must_be_the_one_the_probe_names():
    probe = {"observe": "outcome", "expect": "aborting because debug.check_nan_inf is set"}
    with pytest.raises(AssertionError, match="did-not-abort"):
        check_moved("did-not-abort", probe, "ok", "RuntimeError: out of memory")
    with pytest.raises(AssertionError, match="the base run's training failed"):
        check_moved("k", probe, "RuntimeError: boom", "RuntimeError: ... aborting because "
                    "debug.check_nan_inf is set")


def test_a_two_rank_run_that_fails_is_not_moved(tmp_path):
    from tests.torch.ut.trainer.workers import probe_worker

    row = _Row({"observe": "mesh", "ranks": 2, "set": {"parallelism.tensor_parallel_degree": 2}},
               kind="rename")
    ok = {"error": None, "refusal": False, "outcome": "ok", "mesh": ["dp_shard=2", [], [1.0]]}
    # Before, the worker observed a failed build as [its error] -- which differs from any base.
    failed_build = run(_crash_at_build(RuntimeError("the mesh does not fit")), 1, tmp_path / "b")
    failed_training = dict(ok, outcome="RuntimeError: peer gone")
    for failed, words in ((failed_build, "failed to build: RuntimeError: the mesh does not fit"),
                          (failed_training, "failed while training: RuntimeError: peer gone")):
        entry = {
            "base": probe_worker.observation(ok, row.probe, "the base run"),
            "probe": probe_worker.observation(failed, row.probe, "the probed run"),
            "legacy": probe_worker.observation(ok, row.probe, "the legacy run"),
        }
        assert entry["probe"]["observed"] is None and words in entry["probe"]["failure"], entry
        problems = layout_problems("k", row, entry)
        assert len(problems) == 1 and f"the probed run {words}" in problems[0], problems


def test_a_run_starts_without_a_group_left_behind(tmp_path):
    """A failed build elsewhere in this process can leave a process group; a probed run must
    not join it (its backend and timeouts would be that group's, not the run's settings)."""
    import torch.distributed as dist

    from hyper_parallel.runtime.distributed import init_process_group

    init_process_group("gloo", torch.device("cpu"))  # gloo on every device type
    config = apply(base_config(), {"comm.backend": "cpu:gloo"}, Fixtures(tmp_path))
    result = run(config.build, 0, tmp_path / "run")
    assert observed(result, {"observe": "backend"}) == [("cpu", "ProcessGroupGloo")]
    assert not dist.is_initialized()
