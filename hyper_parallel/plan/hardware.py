"""What one accelerator of a cluster does per second: compute, memory, its links.

A :class:`Hardware` profile prices a role's recorded work (:mod:`.timing`). The datasheet
profiles (:func:`datasheet`) cover every GPU preflight knows (``preflight.gpus.GPUS``), with
their sources; a measured profile (:func:`load`, ``--hardware FILE``) is what
``bench/calibrate_hardware.py`` writes on the machine it runs on (a CPU machine's gloo ranks,
``bench/results/hardware_cpu-gloo*.json``, or a GPU node's NCCL ranks).

Sources (``docs/plan.md`` "How a step is priced"; the research notes' section 5):

* peak dense bf16: torchtitan's ``get_peak_flops`` (``pytorch/torchtitan@b5bcd76``); the H200
  is the H100's die (989 TF dense; 1,979 is the sparse figure);
* HBM: H100 SXM 3.35 TB/s, H200 4.8 TB/s (NVIDIA datasheets); A100 80GB 2.039 TB/s, B200
  8 TB/s (NVIDIA datasheets, not in the notes);
* NVLink per GPU and direction: NVLink3 300 GB/s (A100), NVLink4 450 GB/s (H100, H200;
  900 GB/s bidirectional), NVLink5 900 GB/s (B200);
* between nodes: one 400 Gb/s NDR / RoCE NIC per GPU, 50 GB/s (A100 nodes: 200 Gb/s HDR,
  25 GB/s); AutoParallel's ``NCCLTopoConfig.bw_inter``;
* latency (alpha): AutoParallel's fitted H100 NVSwitch + RoCE 400G table
  (``meta-pytorch/autoparallel@331b7d9:autoparallel/cost_models/h100_nvswitch_roce_400g.py``):
  ~160 us inside a node (all_reduce on 1 x 8), ~175 us across nodes (all_to_all on 8 x 8);
  used for every GPU (no fitted table exists for the others);
* achievable fraction of peak: AutoParallel's compute cost divides FLOPs by 0.7 of the peak
  and bytes by 0.7 of the HBM bandwidth (``autoparallel/optimize_sharding.py``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields

from hyper_parallel.utils.errors import ConfigError

#: The fraction of the datasheet peak a large bf16 matmul reaches (AutoParallel's 0.7).
MATMUL_EFFICIENCY = 0.7
#: The fraction of the HBM bandwidth a memory-bound kernel reaches (AutoParallel's 0.7).
MEMORY_EFFICIENCY = 0.7
#: The fitted latencies of one collective (see the module docstring).
NVLINK_LATENCY_S = 160e-6
NETWORK_LATENCY_S = 175e-6
GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """One accelerator's rates, per GPU (per rank)."""

    name: str
    bf16_flops: float
    """Peak dense matmul FLOP/s in the training dtype (bf16 on a GPU)."""
    hbm_bytes_per_s: float
    """Device memory bandwidth."""
    intra_node_bytes_per_s: float
    """Bus bandwidth of one GPU inside its node, per direction (NVLink)."""
    intra_node_latency_s: float
    """The fixed cost (alpha) of one collective inside a node."""
    inter_node_bytes_per_s: float
    """Bus bandwidth of one GPU to other nodes (its share of the network)."""
    inter_node_latency_s: float
    """The fixed cost (alpha) of one collective across nodes."""
    matmul_efficiency: float = MATMUL_EFFICIENCY
    """Achieved over peak for the step's matmuls (datasheets: AutoParallel's 0.7; a measured
    profile: its calibration's rate at the shapes it timed over its peak)."""
    sources: tuple[str, ...] = ()
    """Where each figure comes from."""
    memory_efficiency: float = MEMORY_EFFICIENCY
    """Achieved over :attr:`hbm_bytes_per_s` for the memory-bound operators."""
    overlap: float = 1.0
    """The fraction of FSDP's collectives' time that compute running at once can hide: 1 on a
    GPU (NCCL runs on its own stream and SMs); 0 on a CPU, where FSDP2 has no stream to put
    them on and each one blocks the rank until it ends (``bench/calibrate_hardware.py``)."""
    collective_cost_factors: Mapping[str, float] = field(default_factory=dict)
    """How many times its alpha-beta price a collective of a kind costs on this backend, by
    kind (``reduce_scatter``, ``all_to_all``, ...; a kind absent: 1). Measured: gloo runs a
    reduce-scatter as a copy and an all-reduce of the whole input, about twice its price
    (``bench/calibrate_hardware.py``); the datasheets' NCCL: none."""
    attention_efficiency: float = 0.0
    """Achieved over peak for the attention kernels; 0: :attr:`matmul_efficiency`."""
    operator_overhead_s: float = 0.0
    """The host's fixed cost of one operator, paid on top of its work: measured on a CPU,
    where the same cores dispatch and compute; 0 on a GPU, whose launch queue hides the
    launches behind kernels longer than they are (the large-model steps a plan is for)."""
    dtensor_operator_overhead_s: float = 0.0
    """The extra host cost of one operator on DTensors (sharding propagation); as above."""

    def __post_init__(self) -> None:
        for f in ("bf16_flops", "hbm_bytes_per_s", "intra_node_bytes_per_s",
                  "inter_node_bytes_per_s"):
            value = getattr(self, f)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{f} is {value!r}; give a positive number",
                                  path=f"hardware.{f}")
        for f in ("intra_node_latency_s", "inter_node_latency_s", "operator_overhead_s",
                  "dtensor_operator_overhead_s"):
            value = getattr(self, f)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{f} is {value!r}; give seconds >= 0", path=f"hardware.{f}")
        for f in ("matmul_efficiency", "memory_efficiency", "overlap"):
            value = getattr(self, f)
            if not (isinstance(value, (int, float)) and 0 <= value <= 1) or (
                    f != "overlap" and value == 0):
                raise ConfigError(f"{f} is {value!r}; give a fraction in (0, 1]",
                                  path=f"hardware.{f}")
        if not isinstance(self.collective_cost_factors, Mapping):
            raise ConfigError(f"collective_cost_factors is {self.collective_cost_factors!r}; "
                              "give an object of collective kind -> factor",
                              path="hardware.collective_cost_factors")
        if self.collective_cost_factors:  # the kinds' home imports torch: a datasheet needn't
            from hyper_parallel.preflight.work import KINDS
        for kind, value in self.collective_cost_factors.items():
            where = f"hardware.collective_cost_factors.{kind}"
            if kind not in KINDS:
                from hyper_parallel.utils.suggest import did_you_mean

                raise ConfigError(f"{kind!r} is no collective kind{did_you_mean(kind, KINDS)}; "
                                  f"the kinds are {', '.join(KINDS)}", path=where)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{value!r}; give a positive factor", path=where)
        if not 0 <= self.attention_efficiency <= 1:
            raise ConfigError(f"attention_efficiency is {self.attention_efficiency!r}; give a "
                              "fraction in [0, 1] (0: the matmul efficiency)",
                              path="hardware.attention_efficiency")

    @property
    def matmul_flops(self) -> float:
        """The matmul rate a step reaches."""
        return self.bf16_flops * self.matmul_efficiency

    @property
    def attention_flops(self) -> float:
        return self.bf16_flops * (self.attention_efficiency or self.matmul_efficiency)

    @property
    def memory_bytes_per_s(self) -> float:
        return self.hbm_bytes_per_s * self.memory_efficiency


_TORCHTITAN = "peak bf16: torchtitan get_peak_flops (pytorch/torchtitan@b5bcd76)"
_AUTOPARALLEL_FIT = ("latency: AutoParallel's fitted H100 NVSwitch + RoCE 400G table "
                     "(meta-pytorch/autoparallel@331b7d9)")
_EFFICIENCY = "0.7 of peak FLOPs and HBM: AutoParallel's compute cost (optimize_sharding.py)"
_NIC400 = "network: one 400 Gb/s NDR/RoCE NIC per GPU = 50 GB/s (AutoParallel bw_inter)"


def _gpu(name: str, tflops: float, hbm_tb: float, nvlink_gb: float, net_gb: float,
         *sources: str) -> Hardware:
    return Hardware(name=name, bf16_flops=tflops * 1e12, hbm_bytes_per_s=hbm_tb * 1e12,
                    intra_node_bytes_per_s=nvlink_gb * GB, intra_node_latency_s=NVLINK_LATENCY_S,
                    inter_node_bytes_per_s=net_gb * GB, inter_node_latency_s=NETWORK_LATENCY_S,
                    sources=(_TORCHTITAN, *sources, _AUTOPARALLEL_FIT, _EFFICIENCY))


#: The datasheet profiles, by preflight's GPU names (``preflight.gpus.GPUS``).
DATASHEETS: dict[str, Hardware] = {
    hw.name: hw
    for hw in (
        _gpu("a100-80gb", 312, 2.039, 300, 25,
             "HBM2e 2.039 TB/s: NVIDIA A100 80GB SXM datasheet",
             "NVLink3 600 GB/s bidirectional = 300 per direction: NVIDIA A100 datasheet",
             "network: one 200 Gb/s HDR NIC per GPU = 25 GB/s (DGX A100)"),
        _gpu("h100-80gb", 989, 3.35, 450, 50,
             "HBM3 3.35 TB/s: NVIDIA H100 SXM datasheet",
             "NVLink4 900 GB/s bidirectional = 450 per direction: NVIDIA H100 datasheet",
             _NIC400),
        _gpu("h100-96gb", 989, 2.0, 450, 50,
             "HBM2e 2.0 TB/s: the H100 HBM2e figure (NVIDIA H100 PCIe datasheet; the 96 GB "
             "SXM part torchtitan benchmarks on publishes none)",
             "NVLink4 450 GB/s per direction: NVIDIA H100 datasheet", _NIC400),
        _gpu("h200", 989, 4.8, 450, 50,
             "HBM3e 4.8 TB/s: NVIDIA H200 datasheet (dense 989 TF: the H100's die)",
             "NVLink4 450 GB/s per direction: NVIDIA H200 datasheet", _NIC400),
        _gpu("b200", 2250, 8.0, 900, 50,
             "HBM3e 8 TB/s: NVIDIA DGX B200 datasheet",
             "NVLink5 1.8 TB/s bidirectional = 900 per direction: NVIDIA B200 datasheet",
             _NIC400),
    )
}


def datasheet(gpu_name: str) -> Hardware:
    """The datasheet profile of ``gpu_name`` (a name of ``preflight.gpus.GPUS``); a
    ``ConfigError`` naming the known ones for any other."""
    from hyper_parallel.utils.suggest import did_you_mean

    if gpu_name not in DATASHEETS:
        raise ConfigError(
            f"{gpu_name!r} has no hardware profile{did_you_mean(gpu_name, DATASHEETS)}; choose "
            f"one of {', '.join(DATASHEETS)}, or give a measured one with --hardware FILE "
            "(bench/calibrate_hardware.py writes it)", path="--gpu")
    return DATASHEETS[gpu_name]


_FIELDS = {f.name for f in fields(Hardware)}
_REQUIRED = {f.name for f in fields(Hardware)
             if f.default is MISSING and f.default_factory is MISSING}


def from_dict(data: dict, where: str = "hardware") -> Hardware:
    """A profile from its JSON object (:func:`to_dict`'s); ``ConfigError`` naming ``where``
    for an unknown or missing field or a bad value."""
    from hyper_parallel.utils.suggest import did_you_mean

    if not isinstance(data, dict):
        raise ConfigError(f"a hardware profile is a JSON object, not {type(data).__name__}",
                          location=where)
    unknown = [k for k in data if k not in _FIELDS and not k.startswith("_")]
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]!r}{did_you_mean(unknown[0], _FIELDS)}; a "
                          f"profile has {', '.join(sorted(_FIELDS))}", location=where)
    missing = sorted(_REQUIRED - set(data))
    if missing:
        raise ConfigError(f"missing {', '.join(missing)}; bench/calibrate_hardware.py writes "
                          "every field", location=where)
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if "sources" in values:
        values["sources"] = tuple(values["sources"])
    try:
        return Hardware(**values)
    except ConfigError as exc:
        raise ConfigError(exc.message, path=exc.path, location=where) from None
    except TypeError as exc:
        raise ConfigError(str(exc), location=where) from None


def to_dict(hardware: Hardware) -> dict:
    """The JSON object of a profile (``--hardware`` reads it back with :func:`load`)."""
    out = {f.name: getattr(hardware, f.name) for f in fields(Hardware)}
    out["sources"] = list(hardware.sources)
    out["collective_cost_factors"] = dict(hardware.collective_cost_factors)
    return out


def load(path: str) -> Hardware:
    """A measured profile (``--hardware FILE``: the JSON ``bench/calibrate_hardware.py``
    writes); a ``ConfigError`` naming the file for a missing, unreadable or bad one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; bench/calibrate_hardware.py writes one",
                          path="--hardware") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})", path="--hardware") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path="--hardware",
                          location=f"{path}:{exc.lineno}") from None
    return from_dict(data, where=os.fspath(path))


def save(hardware: Hardware, path: str) -> None:
    """Write a profile as JSON, atomically (a temporary file renamed over ``path``), with the
    umask's permissions."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".hardware-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(to_dict(hardware), f, indent=2, sort_keys=True)
            f.write("\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["DATASHEETS", "Hardware", "datasheet", "from_dict", "load", "save", "to_dict"]
