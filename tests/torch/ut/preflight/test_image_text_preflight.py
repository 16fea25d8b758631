"""Preflight of the image-text model counts its vision tower: the tower's parameters (and so
its gradients and optimizer state) beside the decoder's, and the activations of a micro-batch's
images, which grow with the image size (``vl_grid_*``: one image per row)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.preflight.__main__ import main

VL = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_vl",
      "--dataloader.dataset=vl_dummy", "--training.local_batch_size=1",
      "--training.global_batch_size=1", "--training.seq_len=128"]


def _role(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    (role,) = json.loads(out.getvalue())["roles"]
    return role


#: The two runs: one image of 2 x 2 patches a row, and one of 16 x 16.
GRIDS = {"small images": (1, 2, 2), "large images": (1, 16, 16)}


@pytest.fixture(scope="module")
def roles(request, tmp_path_factory) -> dict:
    """Each run's role (``--json``), made once per session (:mod:`tests.helpers.session_cache`):
    the two tests land on both xdist workers."""
    from tests.helpers.session_cache import session_cache

    def make(_) -> dict:
        return {name: _role([*VL, f"--dataloader.vl_grid_t={t}", f"--dataloader.vl_grid_h={h}",
                             f"--dataloader.vl_grid_w={w}"])
                for name, (t, h, w) in GRIDS.items()}

    cache = session_cache(request.config, tmp_path_factory, "preflight_image_text")
    return cache.get(("image-text roles", VL, GRIDS), make)


@pytest.mark.slow
def test_the_towers_parameters_are_counted(roles):
    config = FLAVORS["debugmodel_vl"]
    tower = config.vision_config.num_params(config.hidden_size)
    decoder = FLAVORS["debugmodel"].replace(vocab_size=config.vocab_size)
    from hyper_parallel.models.qwen3_5.model import param_count_from_config

    total = param_count_from_config(decoder)["total"] + tower
    assert roles["small images"]["params_bytes"] == 4 * total  # fp32, one rank


@pytest.mark.slow
def test_the_images_activations_are_counted(roles):
    small, large = roles["small images"], roles["large images"]
    # 16 x 16 patches (256; 64 tokens of the 128) against 2 x 2 (4): the tower's blocks hold
    # each patch's activations for the backward, at width 64 and MLP 128, several each.
    grown = large["activations_bytes"] - small["activations_bytes"]
    print(f"\nimage-text preflight: +{grown / 2**20:.2f} MiB of activations for 252 more patches")
    assert grown > 252 * 64 * 4 * 4
    assert large["params_bytes"] == small["params_bytes"]
