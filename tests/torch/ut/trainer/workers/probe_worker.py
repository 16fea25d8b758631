"""torchrun worker (2 ranks, gloo): the layout probes of the field table.

``probe_worker.py OUT KEY...`` runs, for each probe key of ``test_field_probes.ROWS``, the base
run, the probed run and (mapped rows) the probed run through the legacy YAML, each training the
engine for its steps and reading the probe's observable (``mesh``: the device mesh and the
parameters' placements; any other as the one-rank probes read it); rank 0 writes
``{key: {"base": ..., "probe": ..., "legacy": ...}}`` to OUT.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

from tests.torch.ut.trainer import test_field_probes as probes


def mesh(result: dict) -> list:
    if result["error"] is not None:
        return [result["error"]]
    trainer = result["trainer"]
    placements = [
        (name, str(getattr(p, "placements", None)))
        for name, p in list(trainer.model.named_parameters())[:4]
    ]
    return [trainer.parallel_dims.summary(), placements, result["loss"]]


def observation(result: dict, probe: dict) -> list:
    if probe["observe"] == "mesh" or result["error"] is not None:
        return mesh(result)
    return probes.observed(result, probe)


def main() -> None:
    out, *keys = sys.argv[1:]
    root = Path(tempfile.mkdtemp(prefix="hp_probe_"))
    fixtures = probes.Fixtures(root / "fixtures")
    results = {}
    for i, key in enumerate(keys):
        row = probes.ROWS[key]
        probe = row.probe
        steps = probe.get("steps", 1)
        base = probes.apply(probes.base_config(), probe.get("base", {}), fixtures)
        probed = probes.apply(base, probe["set"], fixtures)
        work = root / f"{i}-rank{os.environ.get('RANK', '0')}"
        entry = {
            "base": observation(
                probes.engine_run(base, steps, work / "base", keep_group=True), probe),
            "probe": observation(
                probes.engine_run(probed, steps, work / "probe", keep_group=True), probe),
        }
        if row.kind in probes.MAPPED:
            entry["legacy"] = observation(
                probes.legacy_run(probed, steps, work / "legacy", keep_group=True), probe)
        results[key] = entry
    if os.environ.get("RANK", "0") == "0":
        Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
