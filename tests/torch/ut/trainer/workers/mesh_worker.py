"""Worker (N ranks, gloo): build ParallelDims meshes, one per JSON set of degrees, in one process
group, and write what each looks like to JSON (rank 0): ``mesh_worker.py '[{...}, ...]' OUT``."""

import json
import sys

import torch
import torch.distributed as dist

from hyper_parallel.runtime.parallel_dims import ParallelDims


def describe(kwargs: dict) -> dict:
    dims = ParallelDims(world_size=dist.get_world_size(), **kwargs)
    mesh = dims.build_mesh("cpu")
    assert dims.build_mesh("cpu") is mesh  # cached
    info = {
        "dim_names": list(mesh.mesh_dim_names),
        "shape": list(mesh.shape),
        "aliases": {},
        "dp_shard": dims.dp_shard,
    }
    for alias in dims.alias_dims():
        sub = dims.get_mesh(alias)
        # Ranks that share my alias group, found by an all-gather over that group.
        ranks = [None] * sub.size()
        dist.all_gather_object(ranks, dist.get_rank(), group=sub.get_group())
        info["aliases"][alias] = {"size": sub.size(), "group_of_rank": sorted(ranks)}
    # Collectives really run on every named dim.
    for name in mesh.mesh_dim_names:
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh[name].get_group())
        assert t.item() == mesh[name].size()
    return info


def main() -> None:
    all_kwargs, out_path = json.loads(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    infos = [describe(kwargs) for kwargs in all_kwargs]
    if dist.get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump(infos, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
