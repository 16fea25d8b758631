"""``python -m hyper_parallel.launch``, in process: the world-size rule, the job files (golden),
the Kubernetes schema check, preflight at the head, legacy YAMLs, submission, fleets.

The jobs themselves run in ``tests/torch/st/launch/test_launch_jobs.py``.

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/torch/ut/launch/test_launch.py
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hyper_parallel.launch.__main__ import main
from hyper_parallel.launch.kubernetes import validate
from hyper_parallel.launch.world import fit
from hyper_parallel.utils.errors import ConfigError
from tests.helpers import cluster_standins

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"
REPO = Path(__file__).resolve().parents[4]
RECIPE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2"]
NAMES = {"dp_replicate": "parallelism.data_parallel_replicate_degree",
         "dp_shard": "parallelism.data_parallel_shard_degree",
         "cp": "parallelism.context_parallel_degree", "tp": "parallelism.tensor_parallel_degree",
         "pp": "parallelism.pipeline_parallel_degree", "ep": "parallelism.expert_parallel_degree"}


def parallelism(dp_replicate=1, dp_shard=None, cp=1, tp=1, pp=1, ep=1):
    return SimpleNamespace(
        data_parallel_replicate_degree=dp_replicate, data_parallel_shard_degree=dp_shard,
        context_parallel_degree=cp, tensor_parallel_degree=tp, pipeline_parallel_degree=pp,
        expert_parallel_degree=ep, expert_tensor_parallel_degree=1, num_pp_microbatches=1)


degree = st.sampled_from([1, 1, 2, 4])


@settings(max_examples=300, deadline=None)
@given(dp_replicate=degree, dp_shard=st.sampled_from([None, -1, 1, 2, 4, 8]), cp=degree,
       tp=degree, pp=degree, ep=degree, gpus=st.sampled_from([1, 2, 4, 8]),
       nodes=st.sampled_from([None, 1, 2, 3, 4, 16]))
@example(dp_replicate=1, dp_shard=8, cp=1, tp=1, pp=1, ep=16, gpus=8, nodes=16)
def test_the_world_is_the_degrees_product_on_whole_nodes(dp_replicate, dp_shard, cp, tp, pp, ep,
                                                          gpus, nodes):
    if cp > 1 and (pp > 1 or ep > 1):
        cp = 1  # refused by the layout rules (their own tests), not by the world size
    layout = parallelism(dp_replicate, dp_shard, cp, tp, pp, ep)
    others = dp_replicate * cp * tp * pp * ep
    inferred = dp_shard == -1
    needed = others * (1 if dp_shard in (None, -1) else dp_shard)
    if inferred:
        fits = nodes is not None and (nodes * gpus) % others == 0
    elif nodes is None:
        fits = needed % gpus == 0
    else:
        fits = nodes * gpus == needed
    if not fits:
        with pytest.raises(ConfigError) as refused:
            fit(layout, nodes, gpus)
        message = str(refused.value)
        assert refused.value.path in ("--nodes", NAMES["dp_shard"])
        for name, value in (("dp_replicate", dp_replicate), ("cp", cp), ("tp", tp),
                            ("pp", pp), ("ep", ep)):
            if value > 1:
                assert f"{NAMES[name]} {value}" in message, message
        return
    cluster, resolved = fit(layout, nodes, gpus)
    assert cluster.gpus_per_node == gpus
    if inferred:
        assert resolved * others == cluster.world == nodes * gpus
    else:
        assert resolved is None and cluster.world == needed


def test_a_mismatch_names_the_degrees_and_the_nodes_that_fit():
    with pytest.raises(ConfigError) as refused:
        fit(parallelism(dp_shard=8, ep=16), 8, 8)
    assert str(refused.value) == (
        "--nodes: parallelism.data_parallel_shard_degree 8 x parallelism.expert_parallel_degree "
        "16 = 128 ranks, but --nodes 8 x --gpus-per-node 8 gives 64 ranks; 16 nodes x 8 GPUs "
        "gives 128; pass --nodes 16")
    with pytest.raises(ConfigError, match="12 is not a multiple of 8 GPUs a node; run fewer "
                       r"ranks a node \(--nodes 2 --gpus-per-node 6 or --nodes 3 "
                       r"--gpus-per-node 4\)"):
        fit(parallelism(tp=4, pp=3), None, 8)


def _launch(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path}: run with HYPER_PARALLEL_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"{name} differs from its golden file; if the change is meant, run with "
        "HYPER_PARALLEL_UPDATE_GOLDEN=1 and review the diff")


COMMON = ("--workdir=/shared/project", "--no-preflight", "--dry-run")


@pytest.mark.parametrize("scheduler, extra, golden", [
    ("slurm", ("--gpus-per-node=1", "--time=04:00:00", "--partition=gpu",
               "--setup=source .venv/bin/activate", "--env=NCCL_SOCKET_IFNAME=ib0"),
     "debugmodel_fsdp2.sbatch"),
    ("torchrun", ("--gpus-per-node=1", "--rdzv-host=node0"), "debugmodel_fsdp2_2nodes.sh"),
    ("torchrun", ("--gpus-per-node=2",), "debugmodel_fsdp2_1node.sh"),
    ("kubernetes", ("--gpus-per-node=1", "--image=registry.example/hyper-parallel:1",
                    "--volume-claim=training-checkpoints", "--namespace=ml"),
     "debugmodel_fsdp2.yaml"),
])
def test_the_job_files_read_like_hand_written_ones(capsys, scheduler, extra, golden):
    code, out, err = _launch(capsys, *RECIPE, "--training.steps=100",
                             f"--scheduler={scheduler}", *COMMON, *extra)
    assert code == 0, err
    _golden(golden, out)


def test_the_trainjob_is_checked_against_kubeflow_trainers_schema(capsys):
    code, out, err = _launch(capsys, *RECIPE, "--scheduler=kubernetes", "--gpus-per-node=1",
                             "--image=img:1", "--volume-claim=pvc", *COMMON)
    assert code == 0, err
    document = yaml.safe_load(out)
    validate(document)
    unknown = yaml.safe_load(out)
    unknown["spec"]["trainer"]["gpus"] = 2
    with pytest.raises(ConfigError, match=r"does not know: spec\.trainer\.gpus"):
        validate(unknown)
    wrong_type = yaml.safe_load(out)
    wrong_type["spec"]["trainer"]["numNodes"] = "2"
    with pytest.raises(ConfigError, match="does not validate"):
        validate(wrong_type)
    missing = yaml.safe_load(out)
    del missing["spec"]["runtimeRef"]
    with pytest.raises(ConfigError, match="does not validate"):
        validate(missing)


@pytest.mark.parametrize("extra, field, text", [
    (("--scheduler=kubernetes", "--image=i"), "--volume-claim", "must outlive its pods"),
    (("--scheduler=kubernetes", "--volume-claim=c"), "--image", "runs in a container"),
    (("--scheduler=kubernetes", "--image=i", "--volume-claim=c", "--volume-mount=/mnt",
      "--checkpoint.folder=/elsewhere/ckpt"), "checkpoint.folder", "not on the checkpoint volume"),
    (("--scheduler=kubernetes", "--image=i", "--volume-claim=c", "--volume-mount=ckpt"),
     "--volume-mount", "not a path in the container"),
    (("--scheduler=torchrun",), "--rdzv-host", "meet at a rendezvous"),
    (("--scheduler=slurm", "--image=i", "--rdzv-host=h"), "--scheduler",
     "--rdzv-host, --image are read by kubernetes and torchrun jobs, not by slurm jobs"),
    (("--scheduler=slurm", "--nodes=3"), "--nodes", "gives 3 ranks; 2 nodes x 1 GPUs gives 2"),
    # A limit the stop signal would fill: the job would stop and requeue as it starts.
    (("--scheduler=slurm", "--time=5", "--stop-grace=300"), "--time",
     "5 (300 s) leaves no time to train"),
    (("--scheduler=slurm", "--time=4h"), "--time", "not a Slurm time limit"),
    (("--scheduler=slurm", "--mem-per-gpu=lots"), "--mem-per-gpu", "not a Slurm memory size"),
    (("--scheduler=slurm", "--cpus-per-gpu=0"), "--cpus-per-gpu", "not a core count"),
    (("--scheduler=torchrun", "--cpus-per-gpu=4"), "--scheduler",
     "--cpus-per-gpu is read by slurm jobs"),
    (("--scheduler=slurm", "--rdzv-port=70000"), "--rdzv-port", "not a TCP port"),
    (("--scheduler=slurm", "--stop-grace=0"), "--stop-grace", "no time to write its checkpoint"),
    # A line break would end the #SBATCH line: the rest would run as shell.
    (("--scheduler=slurm", "--partition=gpu\nrm -rf ~"), "--partition", "line break"),
    (("--scheduler=slurm", "--sbatch=--exclusive\ntouch pwned"), "--sbatch", "line break"),
])
def test_refusals_name_the_option_and_the_fix(capsys, extra, field, text):
    code, out, err = _launch(capsys, *RECIPE, "--gpus-per-node=1", *COMMON, *extra)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {field}: ") and text in err, err


def test_a_slurm_job_asks_for_the_cores_and_memory_of_its_ranks(capsys):
    def script(*extra: str) -> str:
        code, out, err = _launch(capsys, *RECIPE, "--scheduler=slurm", "--gpus-per-node=2",
                                 "--nodes=1", *COMMON, *extra)
        assert code == 0, err
        return out

    # Each rank: its intra-op threads and its loader's worker processes.
    out = script("--omp-threads=3", "--dataloader.num_workers=2")
    assert "#SBATCH --cpus-per-task=10\n" in out and "#SBATCH --mem=0\n" in out
    # srun must pass it on: Slurm 22.05's srun no longer reads SLURM_CPUS_PER_TASK.
    assert "srun --nodes=1 --ntasks-per-node=1 --cpus-per-task=10 " in out
    out = script("--cpus-per-gpu=4", "--mem-per-gpu=64G")
    assert "#SBATCH --cpus-per-task=8\n" in out and "--cpus-per-task=8 --kill-on-bad-exit" in out
    assert "#SBATCH --mem-per-gpu=64G\n" in out and "--mem=0" not in out
    # The rendezvous port: from the job id, or the one given.
    assert "rdzv_port=$((29500 + SLURM_JOB_ID % 3000))\n" in script()
    assert "rdzv_port=31000\n" in script("--rdzv-port=31000")


#: Values no generated script may run or mangle: command substitutions, variables, quotes,
#: comments, globs, line breaks.
HOSTILE = ["$(touch pwned)", "`touch pwned`", "$HOME", "${HOME}", "${head_node}", "'", '"',
           "\\", "\n", "#", "*", "~", "{a,b}", ";", "&", "|", " ", "!", "$'x'", "%j", "="]
#: The values the batch script's own variables hold in the checks below.
SCRIPT_VALUES = {"head_node": "node 0$(x)", "rdzv_port": "29511", "SLURM_JOB_ID": "4242"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)),
    max_size=6).map("".join))
@example("--rdzv-endpoint=${head_node}:${rdzv_port}")
@example("$${head_node}'${rdzv_port}\n")
def test_a_quoted_word_is_read_back_as_it_was_written(text):
    """bash reads every quoted word back as the value; only the references to the script's own
    variables expand (to those variables' values, whatever they hold)."""
    import re
    import subprocess

    from hyper_parallel.launch.job import SLURM_SCRIPT_VARIABLES, quote

    quoted = [quote(text), quote(text, SLURM_SCRIPT_VARIABLES)]
    assert all("\n" not in word for word in quoted)  # one line, whatever the value
    printed = subprocess.run(["bash", "-c", f"printf '%s\\0' {' '.join(quoted)}"],
                             env={"PATH": os.environ["PATH"], **SCRIPT_VALUES},
                             capture_output=True, check=True).stdout
    names = "|".join(SLURM_SCRIPT_VARIABLES)
    expanded = re.sub(rf"\$\{{({names})\}}", lambda m: SCRIPT_VALUES[m.group(1)], text)
    assert printed.decode().split("\0")[:2] == [text, expanded]


def test_every_word_of_the_generated_scripts_is_inert(capsys, tmp_path):
    """A working directory, checkpoint folder and variable full of shell syntax: the Slurm script
    (run with the srun stand-in) and the torchrun script hand torchrun exactly the words the job
    holds, and nothing in them runs."""
    import json
    import subprocess
    import sys

    hostile = "a b'c\"d $(touch pwned) `touch pwned` $HOME #e ${head_node}"
    workdir = tmp_path / f"work {hostile}"
    workdir.mkdir()
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "torchrun").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "json.dump([sys.argv[1:], os.environ['HOSTILE_VALUE'], os.getcwd()], "
        "open(os.environ['ARGV_OUT'], 'w'))\n")
    (stub / "torchrun").chmod(0o755)
    standins = cluster_standins.install(tmp_path / "bin")
    dump = f"out/{hostile}\nline two"
    for scheduler, extra in (("slurm", ("--gpus-per-node=2", "--nodes=1")),
                             ("torchrun", ("--gpus-per-node=1", "--rdzv-host=node0"))):
        job = tmp_path / f"job.{scheduler}"
        code, _, err = _launch(capsys, *RECIPE, f"--dump_folder={dump}",
                                 f"--scheduler={scheduler}", f"--workdir={workdir}",
                                 "--no-preflight", "--dry-run", "-o", str(job),
                                 f"--env=HOSTILE_VALUE={hostile}", *extra)
        assert code == 0, err
        argv_out = tmp_path / f"argv.{scheduler}"
        env = {**os.environ, **cluster_standins.slurm_env(standins, nodes=1),
               "ARGV_OUT": str(argv_out)}
        env["PATH"] = f"{stub}{os.pathsep}{env['PATH']}"
        done = subprocess.run(["bash", str(job)], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        argv, value, cwd = json.loads(argv_out.read_text())
        assert value == hostile and cwd == str(workdir)
        assert f"--dump_folder={dump}" in argv
        endpoint = next(a for a in argv if a.startswith("--rdzv-endpoint"))
        if scheduler == "slurm":
            # The script's own variables expanded: the first node, the port from the job id.
            assert endpoint == f"--rdzv-endpoint=127.0.0.1:{29500 + 4242 % 3000}"
            assert "--rdzv-id=4242" in argv
            log = workdir / "out" / f"{hostile}\nline two" / "checkpoint" / "slurm-4242-0.log"
            assert log.is_file()
        else:
            assert endpoint == "--rdzv-endpoint=node0:29500"
    assert not list(tmp_path.rglob("pwned")) and not (REPO / "pwned").exists()


def test_preflight_heads_the_output_and_a_job_that_does_not_fit_is_not_written(capsys, tmp_path,
                                                                             monkeypatch):
    import hyper_parallel.preflight.check as check

    # The changes that would make it fit are preflight's to find (its own tests); here they
    # would only cost a few more simulations.
    monkeypatch.setattr(check, "suggestions_for", lambda config, preflight: [])
    job = tmp_path / "job.sbatch"
    code, out, err = _launch(capsys, *RECIPE, "--scheduler=slurm", "--gpus-per-node=2",
                             "--gpu-memory=1", "--dry-run", "-o", str(job))
    assert code == 1 and not job.exists()
    # The report comes first (whatever a handler another test left on the logger prints).
    report = err.index("preflight of recipe qwen3_5_v2 --config qwen3_5_v2_debugmodel_fsdp2: "
                       "2 ranks")
    assert "oom" in err[report:] and report < err.index("the job was not written"), err
    code, out, err = _launch(capsys, *RECIPE, "--scheduler=slurm", "--gpus-per-node=2",
                             "--gpu=h100-80gb", "--dry-run", "-o", str(job))
    assert code == 0, err
    header = [line for line in job.read_text().splitlines() if line.startswith("# preflight")]
    assert header[0].startswith("# preflight on h100-80gb (79.6 GiB a GPU): fits, "), header


def test_a_legacy_yaml_runs_as_the_recipe_it_converts_to(capsys, tmp_path):
    yaml_path = REPO / "examples" / "yaml" / "train_qwen3_5_fsdp2.yaml"
    code, out, err = _launch(capsys, str(yaml_path), "--train.max_steps=7",
                             "--scheduler=slurm", "--gpus-per-node=2", f"--workdir={tmp_path}",
                             "--no-preflight", "--dry-run")
    assert code == 0, err
    recipe = tmp_path / "recipes" / "train_qwen3_5_fsdp2.py"
    assert f"recipe written to {recipe}" in err
    assert "--module recipes/train_qwen3_5_fsdp2.py" in out
    assert "--config train_qwen3_5_fsdp2" in out and "--checkpoint.resume_latest=true" in out
    from hyper_parallel.train import parse_run

    os.chdir(tmp_path)
    try:
        job_config = parse_run(["--module", str(recipe), "--config", "train_qwen3_5_fsdp2"]).config
    finally:
        os.chdir(REPO)
    # The same run: the recipe converts back to the YAML's settings, field for field (the
    # model spec is the registry module's, the YAML's the legacy name's; one model).
    from hyper_parallel.config.legacy_adapter import trainer_config_to_legacy

    yaml_config = parse_run([str(yaml_path), "--train.max_steps=7"]).config
    assert trainer_config_to_legacy(job_config) == trainer_config_to_legacy(yaml_config)
    assert job_config.training.steps == 7
    # The same recipe again is no conflict; another one in its place is.
    assert _launch(capsys, str(yaml_path), "--train.max_steps=7", "--scheduler=slurm",
                   "--gpus-per-node=2", f"--workdir={tmp_path}", "--no-preflight",
                   "--dry-run")[0] == 0
    code, out, err = _launch(capsys, str(yaml_path), "--train.max_steps=8", "--scheduler=slurm",
                             "--gpus-per-node=2", f"--workdir={tmp_path}", "--no-preflight",
                             "--dry-run")
    assert code == 2 and "holds another recipe; pass --force" in err
    # A mismatch is named in the YAML's keys.
    code, out, err = _launch(capsys, str(yaml_path), "--train.accelerator.dp_shard=4",
                             "--scheduler=slurm", "--gpus-per-node=2", "--nodes=1",
                             f"--workdir={tmp_path}", "--no-preflight", "--dry-run", "--force")
    assert code == 2 and "train.accelerator.dp_shard 4 = 4 ranks, but --nodes 1" in err, err
    # A refused job leaves nothing behind: no recipe either.
    fresh = tmp_path / "fresh"
    code, out, err = _launch(capsys, str(yaml_path), "--train.accelerator.dp_shard=4",
                             "--scheduler=slurm", "--gpus-per-node=2", "--nodes=1",
                             f"--workdir={fresh}", "--no-preflight", "--dry-run")
    assert code == 2 and not fresh.exists(), err


def test_without_dry_run_the_job_is_written_and_submitted(capsys, tmp_path, monkeypatch):
    standins = cluster_standins.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{standins}{os.pathsep}{os.environ['PATH']}")
    old_umask = os.umask(0o027)
    try:
        code, out, err = _launch(capsys, *RECIPE, "--scheduler=slurm", "--gpus-per-node=1",
                                 f"--workdir={tmp_path}", "--no-preflight")
    finally:
        os.umask(old_umask)
    job = tmp_path / "jobs" / "qwen3-5-v2-debugmodel-fsdp2.sbatch"
    assert code == 0, err
    assert cluster_standins.calls(standins) == [f"sbatch {job}"]
    assert stat.S_IMODE(job.stat().st_mode) == 0o750


def test_a_fleet_gets_one_job_per_recipe(tmp_path, monkeypatch, capsys):
    from hyper_parallel.codegen.__main__ import main as codegen

    monkeypatch.chdir(tmp_path)
    code = codegen(["--from-yaml", str(REPO / "examples" / "yaml"), "-q",
                    "--jobs", "--scheduler kubernetes --gpus-per-node 2 --image img:1 "
                    "--volume-claim pvc"])
    out, err = capsys.readouterr()
    jobs = sorted(p.name for p in (tmp_path / "jobs").iterdir())
    assert jobs == ["train-qwen3-5-0-8b.yaml", "train-qwen3-5-demo.yaml",
                    "train-qwen3-5-fsdp2.yaml", "train-qwen3-5-hsdp.yaml"], (out, err)
    # The two that cannot fill 2-GPU nodes are named, in the YAMLs' keys.
    assert code == 2
    assert "jobs: error: train_qwen3_5_debug: --nodes: every degree is 1: 1 rank" in err
    assert "jobs: error: train_qwen3_5_tp2: --nodes: train.accelerator.dp_shard is -1" in err
    for name in jobs:
        document = yaml.safe_load((tmp_path / "jobs" / name).read_text())
        validate(document)
        command = document["spec"]["trainer"]["command"]
        assert command[command.index("--module") + 1] == "recipes/config_registry.py"
    code = codegen(["--from-yaml", str(REPO / "examples" / "yaml"), "-q", "--force",
                    "--jobs", "--scheduler slurm --gpus-per-node 2 -o x.sbatch"])
    assert code == 2 and "-o is per job" in capsys.readouterr().err
