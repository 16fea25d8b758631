"""The Kubernetes job: a Kubeflow Trainer ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``).

Why ``TrainJob`` and not the training operator's ``PyTorchJob``: Kubeflow Trainer v2 replaces the
training operator (v1, whose ``PyTorchJob`` is in maintenance); a ``TrainJob`` names a training
runtime (``torch-distributed``, installed with Trainer) that owns the JobSet, the pod template
and the torch environment, so the job states only what is the run's own: the image, the command,
the nodes and GPUs, and a patch for the checkpoint volume and the stop grace period. The torch
runtime sets ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and
``PET_MASTER_PORT`` in every node's pod; torchrun reads them as its defaults.

The manifest is checked against Trainer's own API models (the ``kubeflow-trainer-api`` package,
generated from its OpenAPI schema: types, required fields, and no key the schema does not know)
before it is written.
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.launch.job import Job, torchrun_command
from hyper_parallel.utils.errors import ConfigError

API_VERSION = "trainer.kubeflow.org/v1alpha1"
#: The runtime a TrainJob names by default: Kubeflow Trainer's PyTorch runtime.
DEFAULT_RUNTIME = "torch-distributed"
#: The replicated job and container of the torch runtime that the patch addresses.
NODE = "node"
VOLUME = "checkpoints"
#: Who owns the runtime patch (Trainer keys patches by their manager).
PATCH_MANAGER = "hyper-parallel.launch"


def manifest(job: Job) -> dict[str, Any]:
    """The ``TrainJob`` of ``job`` as a plain mapping (YAML-ready)."""
    o = job.options
    gpus = job.cluster.gpus_per_node
    pod_spec: dict[str, Any] = {"terminationGracePeriodSeconds": job.stop_grace}
    if o.get("volume_claim"):
        pod_spec["volumes"] = [{"name": VOLUME,
                                "persistentVolumeClaim": {"claimName": o["volume_claim"]}}]
        pod_spec["containers"] = [{"name": NODE, "volumeMounts": [
            {"name": VOLUME, "mountPath": o["volume_mount"]}]}]
    metadata: dict[str, Any] = {"name": job.name}
    if o.get("namespace"):
        metadata["namespace"] = o["namespace"]
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": {
            "runtimeRef": {"name": o.get("runtime") or DEFAULT_RUNTIME},
            "trainer": {
                "image": o["image"],
                "command": torchrun_command(job, "env"),
                "env": [{"name": k, "value": v} for k, v in sorted(job.env.items())],
                "numNodes": job.cluster.nodes,
                "numProcPerNode": gpus,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus)},
                                     "requests": {"nvidia.com/gpu": str(gpus)}},
            },
            "runtimePatches": [{
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": NODE,
                    "template": {"spec": {"template": {"spec": pod_spec}}},
                }]}}},
            }],
        },
    }


def validate(document: dict[str, Any]) -> None:
    """Raise ``ConfigError`` unless ``document`` is a ``TrainJob`` that Kubeflow Trainer's API
    models read whole: every value of its type, every required field present, and nothing
    they drop (a key the schema does not know)."""
    try:
        from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob
    except ImportError:
        raise ConfigError("writing a Kubernetes TrainJob checks it against Kubeflow Trainer's "
                          "API models: pip install 'hyper_parallel[launch]' (or "
                          "kubeflow-trainer-api)", path="--scheduler") from None
    try:
        parsed = TrainerV1alpha1TrainJob.from_dict(document)
    except Exception as exc:  # pydantic's ValidationError, a missing required key
        raise ConfigError(f"the TrainJob does not validate against Kubeflow Trainer's schema: "
                          f"{exc}", path="--scheduler") from None
    back = parsed.to_dict()
    if back != document:
        raise ConfigError("the TrainJob holds keys Kubeflow Trainer's schema does not know: "
                          f"{_first_difference(document, back)}", path="--scheduler")


def _first_difference(wanted: Any, read: Any, path: str = "") -> str:
    if isinstance(wanted, dict) and isinstance(read, dict):
        for key in wanted:
            if key not in read:
                return f"{path}.{key}".lstrip(".")
            found = _first_difference(wanted[key], read[key], f"{path}.{key}")
            if found:
                return found
        return ""
    if isinstance(wanted, list) and isinstance(read, list) and len(wanted) == len(read):
        for index, (a, b) in enumerate(zip(wanted, read)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return ""
    return "" if wanted == read else path.lstrip(".") or "the document"


def manifest_text(job: Job) -> str:
    """The validated manifest as YAML, the job's header as comments above it."""
    import yaml

    document = manifest(job)
    validate(document)
    body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=100)
    return "".join(f"# {line}\n".replace("# \n", "#\n") for line in job.header) + body


__all__ = ["API_VERSION", "DEFAULT_RUNTIME", "manifest", "manifest_text", "validate"]
