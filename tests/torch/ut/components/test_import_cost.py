"""Building a configuration must not import torch's heavy distributed packages.

``python -m hyper_parallel.codegen --from-yaml`` and the config tools only parse and build
configs; importing ``torch.distributed.tensor`` / ``.checkpoint`` / ``.fsdp`` on that path costs
~0.7 s a process, which is why the components import them inside the functions that use them.
This test runs the config path in a fresh interpreter (``sys.modules`` of the test process is
polluted by other tests) and checks which of those packages got loaded. It asserts behaviour,
not timing, so it is stable on a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("torch.distributed.tensor", "torch.distributed.checkpoint", "torch.distributed.fsdp")

# Records, for each heavy package, the hyper_parallel frames that imported it first, so a
# failure names the offending line instead of just the package.
_SCRIPT = f"""
import json, sys, traceback

HEAVY = {HEAVY!r}
culprits = {{}}

class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY and name not in culprits:
            culprits[name] = [
                f"{{f.filename}}:{{f.lineno}}"
                for f in traceback.extract_stack()
                if "hyper_parallel" in f.filename
            ][-3:]
        return None

sys.meta_path.insert(0, _Watch())

from hyper_parallel.trainer.config_parser import load_config
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config

legacy_to_trainer_config(HyperTrainerConfig())

import hyper_parallel.components
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

HyperTrainer.Config()

loaded = [m for m in HEAVY if m in sys.modules]
print(json.dumps({{"loaded": loaded, "culprits": culprits}}))
"""


def test_config_path_does_not_import_heavy_torch_distributed():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"the config-path script failed:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [], (
        f"building a configuration imported {result['loaded']}; first imported from "
        f"{json.dumps(result['culprits'], indent=2)}. Move that import into the function that "
        "uses it (or under TYPE_CHECKING for annotations)."
    )
