"""Qwen3.5 dense causal LM: hybrid Gated-DeltaNet / gated-attention decoder (plain torch).

Module tree and state-dict names follow Hugging Face's ``Qwen3_5ForCausalLM`` except inside
``linear_attn`` (see :mod:`.gated_deltanet`; :mod:`.state_dict_adapter` converts)::

    model.embed_tokens, model.layers.{i}.{input_layernorm, post_attention_layernorm,
    self_attn.* | linear_attn.*, mlp.{gate,up,down}_proj}, model.norm, model.rotary_emb, lm_head

With a ``vision_config`` the model is the image-text one Hugging Face publishes
(``Qwen3_5ForConditionalGeneration``): the decoder also holds the vision tower as
``model.visual`` (:mod:`.vision`; the checkpoints' own name), whose features replace the image
placeholder tokens' embeddings, and image tokens get three-row positions
(:mod:`.vision_positions`). Without one, nothing of this exists and the model is the text one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from .attention import Qwen3_5Attention
from .configuration import FULL_ATTENTION, Qwen3_5Config
from .gated_deltanet import Qwen3_5GatedDeltaNet, Qwen3_5RMSNormGated, sample_A_log
from .kernels import log_kernel_choice
from .mlp import Qwen3_5MLP
from .norms import Qwen3_5RMSNorm
from .rope import Qwen3_5RotaryEmbedding
from .vision import Qwen3_5VisionModel, Qwen3_5VisionRotaryEmbedding
from .vision_positions import GridInput, image_grids, unpack_row_images
from hyper_parallel.utils.choices import BLOCK_CAUSAL
from hyper_parallel.utils.documents import Documents
from hyper_parallel.utils.module_names import strip_wrapper_prefixes


class Qwen3_5DecoderLayer(nn.Module):
    """Pre-norm residual block: ``x += mixer(input_layernorm(x)); x += mlp(post_attention_layernorm(x))``.

    The mixer is ``self_attn`` (full attention) or ``linear_attn`` (Gated DeltaNet), per
    ``layer_type``; exactly one of the two attributes exists.
    """

    def __init__(self, config: Qwen3_5Config, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.layer_type = config.layer_types[layer_idx]
        if self.layer_type == FULL_ATTENTION:
            self.self_attn = Qwen3_5Attention(config, layer_idx)
        else:
            self.linear_attn = Qwen3_5GatedDeltaNet(config, layer_idx)
        self.mlp = self._build_mlp(config)
        self.input_layernorm = Qwen3_5RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Qwen3_5RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def _build_mlp(self, config: Qwen3_5Config) -> nn.Module:
        """The feed-forward of this layer: the dense SwiGLU (the MoE family builds its mixture
        of experts here)."""
        return Qwen3_5MLP(config.hidden_size, config.intermediate_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        documents: Documents | None = None,
    ) -> torch.Tensor:
        """``documents``: a packed batch's, on the device (``block_causal``), or None (causal
        over the whole row)."""
        normed = self.input_layernorm(hidden_states)
        if self.layer_type == FULL_ATTENTION:
            mixed = self.self_attn(normed, position_embeddings, documents)
        else:
            # position-free: the conv and recurrence order tokens
            mixed = self.linear_attn(normed, documents)
        hidden_states = hidden_states + mixed
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class Qwen3_5Decoder(nn.Module):
    """The decoder: ``embed_tokens``, ``layers`` (``nn.ModuleList``), final ``norm``, ``rotary_emb``.

    Hugging Face calls this ``Qwen3_5Model``; here that name is the whole model on the protocol
    layer (:class:`~hyper_parallel.models.qwen3_5.protocol.Qwen3_5Model`). State-dict names do
    not depend on it: the decoder is the LM's ``model`` attribute either way."""

    #: The decoder layer class (the MoE family's differs only in its feed-forward).
    layer_class: type[Qwen3_5DecoderLayer] = Qwen3_5DecoderLayer

    def __init__(self, config: Qwen3_5Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            self.layer_class(config, i) for i in range(config.num_hidden_layers)
        )
        self.norm = Qwen3_5RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3_5RotaryEmbedding(config)
        self.vision_config = config.vision_config
        if config.vision_config is not None:
            self.visual = Qwen3_5VisionModel(config.vision_config, config.hidden_size)
        #: Whether a packed batch's documents are kept apart (``attn_mask_type``).
        self.block_causal = config.attn_mask_type == BLOCK_CAUSAL
        self._logged_kernels: set[tuple[str, str, str, str]] = set()

    def select_kernels(self) -> None:
        """Resolve ``model.kernels`` for every Gated DeltaNet layer where its parameters are, and
        log each choice the first time this model makes it.

        ``forward`` calls it before running the layers, so compiled layers (``fullgraph``) only
        read the cached choice; a forced ``fla`` that cannot run raises its ``ConfigError``
        here, on the first step.
        """
        for module in self.modules():
            if isinstance(module, Qwen3_5GatedDeltaNet):
                selected = module.select_kernels()
                key = (module.kernels, selected.name, selected.conv_name, selected.device_type)
                if key not in self._logged_kernels:
                    self._logged_kernels.add(key)
                    log_kernel_choice(module.kernels, selected)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: GridInput | None = None,
        documents: Documents | None = None,
    ) -> torch.Tensor:
        """Token ids ``(B, S)`` -> final hidden states ``(B, S, H)``.

        ``block_causal`` (``attn_mask_type``): the rows' documents are kept apart by every
        token mixer; ``documents`` are their boundaries, made on the host from the batch's
        ``position_ids`` (what the step passes), else made here from ``position_ids`` (read
        back from the device if they are there); without either, a row is one document.
        ``causal`` reads neither.

        With images (an image-text model): ``pixel_values`` ``(patches, patch_dim)`` and
        ``image_grid_thw`` ``(images, 3)``, the images of the rows in order, fill the
        placeholder tokens; ``position_ids`` then defaults to the three-row positions (made
        from the ids' values: the data loader's, made on the host, spare the wait). A
        pipeline micro-batch carries them row-aligned instead (``pixel_values`` ``(B, P,
        patch_dim)``, ``image_grid_thw`` ``(B, I, 3)``, ``position_ids`` ``(B, 3, S)``:
        :func:`~.vision_positions.row_images`); only the first stage places the images.
        ``image_grid_thw`` is host data: a
        :class:`~hyper_parallel.utils.host_data.HostTensor` (what the step passes: FSDP's
        root pre-forward leaves it on the host), a host tensor or ``(t, h, w)`` triples.

        A pipeline stage (:mod:`hyper_parallel.models.pipelining`) lacks the modules other
        stages own: without ``embed_tokens`` the input is the previous stage's hidden states,
        without ``norm`` the output is this stage's last layer's."""
        if not torch.compiler.is_compiling():
            self.select_kernels()
        if self.embed_tokens is None:
            hidden_states = input_ids
        else:
            hidden_states = self.embed_tokens(input_ids)
        if pixel_values is not None and pixel_values.dim() == 3:  # a pipeline micro-batch's
            pixel_values, image_grid_thw, position_ids = unpack_row_images(
                pixel_values, image_grid_thw, position_ids)
        first_stage = self.embed_tokens is not None
        if pixel_values is not None and first_stage:
            if position_ids is None or position_ids.dim() == 2:
                # The data loader makes them; a caller may not have, or may hand a packed
                # row's 1-D positions, from which each sample's three rows restart.
                position_ids = self._require_vision().decoder_positions(
                    input_ids, image_grid_thw, packed_positions=position_ids)
            hidden_states = self._place_images(input_ids, hidden_states, pixel_values,
                                               image_grid_thw)
        elif pixel_values is not None and position_ids is None:
            raise ValueError("a later pipeline stage needs the batch's position_ids with its "
                             "images (it cannot read them from the ids it does not have)")
        elif self.vision_config is not None and first_stage:
            hidden_states = self._run_tower_idle(hidden_states)
        # Before the default positions below: a row without positions is one document, which
        # reading that default back from the device would only find out after a wait.
        documents = self._documents(documents, position_ids, hidden_states.device)
        if position_ids is None:
            batch, seq = hidden_states.shape[:2]
            position_ids = torch.arange(seq, device=hidden_states.device).unsqueeze(0).expand(
                batch, -1
            )
        position_embeddings = self.rotary_emb(position_ids, dtype=hidden_states.dtype)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings, documents)
        return hidden_states if self.norm is None else self.norm(hidden_states)

    def _documents(
        self, documents: Documents | None, position_ids: torch.Tensor | None,
        device: torch.device,
    ) -> Documents | None:
        """The documents every layer reads, on ``device`` (one copy per forward, which an
        activation-checkpointing recompute reuses); None when the model is causal or no row
        holds more than one."""
        if not self.block_causal:
            return None
        if documents is None:
            if position_ids is None:  # 0 .. S - 1: every row is one document
                return None
            documents = Documents.from_positions(position_ids)
        if documents.max_per_row == 1:  # the causal path is exactly this
            return None
        return documents.to(device)

    def _require_vision(self) -> Any:
        if self.vision_config is None:
            raise ValueError(
                "the batch holds images (pixel_values) but the model has no vision tower; "
                "set model.config_overrides.vision_config or train an image-text flavor"
            )
        return self.vision_config

    def _run_tower_idle(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``embeddings`` plus zero times the tower's output on one blank merge block.

        A micro-batch without images still runs the tower, so every rank runs the same
        modules: under FSDP a tower that one rank skips while another runs it would leave the
        other's all-gathers and gradient reduce-scatters waiting forever. Adding ``0 *`` the
        output changes no value (the logits are bit-identical) and gives the tower zero
        gradients."""
        vision = self.vision_config
        side = vision.spatial_merge_size
        grid = [(1, side, side)]  # host data, like a batch's image_grid_thw
        blank = torch.zeros(side * side, vision.patch_dim, device=embeddings.device)
        features = self.visual(blank, grid)
        return embeddings + 0 * features.sum().to(embeddings.dtype)

    def _place_images(
        self,
        input_ids: torch.Tensor,
        embeddings: torch.Tensor,
        pixel_values: torch.Tensor,
        image_grid_thw: GridInput | None,
    ) -> torch.Tensor:
        """``embeddings`` with the image placeholder tokens' rows replaced, in order, by the
        tower's features of the images."""
        self._require_vision()
        if image_grid_thw is None:
            raise ValueError("pixel_values come without image_grid_thw (the images' patch grids)")
        # Python ints from here on: the tower's hooks (an FSDP unit) pass them as they are.
        features = self.visual(pixel_values, image_grids(image_grid_thw))
        # The placeholders were matched to the images on the host, image by image, where the
        # positions were made (vision_positions.decoder_positions: by the data loader, or by
        # forward): no count is read back from the device here.
        mask = input_ids == self.vision_config.image_token_id
        return embeddings.masked_scatter(
            mask.unsqueeze(-1), features.to(embeddings.device, embeddings.dtype)
        )


class Qwen3_5ForCausalLM(nn.Module):
    """Causal LM head on :class:`Qwen3_5Decoder`. ``forward`` returns logits ``(B, S, vocab)`` in the
    compute dtype; the loss is computed by the trainer.

    Construction leaves torch's default init on the Linears (or nothing, on the meta device);
    call :meth:`init_weights` for the Hugging Face init. Every token mixer is causal over the
    whole row (``attn_mask_type: causal``, the legacy model) or over each document of a packed
    row (``block_causal``: ``forward``'s ``documents``, or its ``position_ids`` restarting at 0).
    """

    #: The decoder class (``model``); the MoE family names its own.
    decoder_class: type[Qwen3_5Decoder] = Qwen3_5Decoder

    def __init__(self, config: Qwen3_5Config) -> None:
        super().__init__()
        self.config = config
        self._init_modules(config)

    def _init_modules(self, config: Qwen3_5Config) -> None:
        """Create ``model`` and ``lm_head`` from ``config`` and tie them.

        A hook so that a subclass with its own ``__init__`` (``protocol.Qwen3_5Model``, whose
        ``self.config`` is a ``BaseModel.Config``) builds exactly these modules.
        """
        self.model = self.decoder_class(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.tie_weights()

    def select_kernels(self) -> None:
        """Resolve the device-specific kernels now that the parameters are on their device
        (:meth:`Qwen3_5Decoder.select_kernels`); the engine calls it before the first step."""
        self.model.select_kernels()

    def pipeline_units(self) -> list[str]:
        """The modules pipeline stages are cut between, in forward order
        (:mod:`hyper_parallel.models.pipelining`)."""
        layers = [f"model.layers.{i}" for i in range(self.config.num_hidden_layers)]
        tower = [] if self.config.vision_config is None else ["model.visual"]
        return [*tower, "model.embed_tokens", *layers, "model.norm", "lm_head"]

    def tie_weights(self) -> None:
        """``lm_head.weight = model.embed_tokens.weight`` when ``tie_word_embeddings`` (call
        again after anything that replaces parameters, e.g. ``to_empty``). A pipeline stage
        that holds only one of the two has nothing to tie: the stages keep the two copies equal
        (:mod:`hyper_parallel.models.pipelining`)."""
        if (
            self.config.tie_word_embeddings
            and self.lm_head is not None
            and self.model.embed_tokens is not None
        ):
            self.lm_head.weight = self.model.embed_tokens.weight

    @property
    def reads_documents(self) -> bool:
        """Whether this model keeps a packed batch's documents apart (``attn_mask_type:
        block_causal``): the step then passes it the batch's
        :class:`~hyper_parallel.utils.documents.Documents`, made on the host."""
        return self.config.attn_mask_type == BLOCK_CAUSAL

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: GridInput | None = None,
        documents: Documents | None = None,
    ) -> torch.Tensor:
        if documents is not None:
            hidden_states = self.model(input_ids, position_ids, pixel_values, image_grid_thw,
                                       documents)
        elif pixel_values is None:
            hidden_states = self.model(input_ids, position_ids)
        else:
            hidden_states = self.model(input_ids, position_ids, pixel_values, image_grid_thw)
        return hidden_states if self.lm_head is None else self.lm_head(hidden_states)

    # ------------------------------------------------------------------ init
    @torch.no_grad()
    def init_weights(self, buffer_device: torch.device | str | None = None) -> None:
        """Re-initialise every parameter and buffer the way Hugging Face does.

        normal(0, initializer_range) for linear / embedding / conv weights, zeros for biases and
        the ``(1 + w)`` RMSNorms, ones for ``RMSNormGated`` and ``dt_bias``, ``A_log = log(U(0.01,
        16))``; RoPE ``inv_freq`` recomputed on ``buffer_device`` (default: where it lives).

        Works after ``to_empty`` from meta and on DTensor parameters (FSDP / TP): each tensor is
        drawn at its *full* shape from the global RNG, in a fixed order, and the local shard is
        sliced out without communication. The result is therefore identical for every sharding,
        provided all ranks seed the RNG identically (same value, same device type).
        """
        self.init_weights_of_parts([self], buffer_device)

    @torch.no_grad()
    def init_weights_of_parts(
        self, parts: list[nn.Module], buffer_device: torch.device | str | None = None
    ) -> None:
        """:meth:`init_weights` of the modules ``parts`` hold, with ``self`` as the whole model.

        ``self`` may be on ``meta`` (the model the pipeline stages were cut from): the draws
        walk *its* modules in order, each tensor that no part holds is drawn into a scratch
        tensor of its full shape and discarded, so every part's weights are those the whole
        model would get, whatever the stages. A weight two parts hold (a tied embedding on
        the first and the last stage) gets the same draw in both. Parts are matched to
        ``self`` by parameter name (wrapper infixes removed).
        """
        if parts == [self]:
            self.tie_weights()  # to_empty replaced the shared parameter by two
        live_modules: dict[str, list[nn.Module]] = {}
        live_params: dict[str, list[torch.Tensor]] = {}
        for part in parts:
            for name, module in part.named_modules():
                live_modules.setdefault(strip_wrapper_prefixes(name), []).append(module)
            for name, param in part.named_parameters(remove_duplicate=False):
                live_params.setdefault(strip_wrapper_prefixes(name), []).append(param)
        targets: dict[int, list[torch.Tensor]] = {}
        for name, ref in self.named_parameters(remove_duplicate=False):
            bucket = targets.setdefault(id(ref), [])
            for param in live_params.get(strip_wrapper_prefixes(name), ()):
                if all(param is not t for t in bucket):
                    bucket.append(param)
        scratch_device = buffer_device
        if scratch_device is None:
            any_live = next((ps[0] for ps in live_params.values()), None)
            scratch_device = "cpu" if any_live is None else _local_device(any_live)
        std = self.config.initializer_range
        vision = self.config.vision_config
        vision_std = std if vision is None else vision.initializer_range
        seen: set[int] = set()
        filled: set[int] = set()

        def init(param: torch.Tensor | None, fill: Callable[[torch.Tensor], None]) -> None:
            if param is None or id(param) in seen:
                return  # tied weights are drawn once
            seen.add(id(param))
            held = targets.get(id(param), [])
            if not held:  # another stage's: the same draw, discarded
                fill(torch.empty(param.shape, dtype=param.dtype, device=scratch_device))
                return
            _init_tensor(held[0], fill)
            for other in held[1:]:
                _copy_full(other, held[0])
            filled.update(id(t) for t in held)

        text_normal = lambda t: t.normal_(0.0, std)
        vision_normal = lambda t: t.normal_(0.0, vision_std)
        zeros = lambda t: t.zero_()
        ones = lambda t: t.fill_(1.0)
        for wrapped_name, module in self.named_modules():
            name = strip_wrapper_prefixes(wrapped_name)
            normal = vision_normal if name.startswith("model.visual.") else text_normal
            # Every part holds its own copy of the modules each stage has (the rotary
            # embedding); the other modules are in one part at most.
            copies = live_modules.get(name, [])
            if isinstance(module, (nn.Linear, nn.Conv3d)):
                init(module.weight, normal)
                init(module.bias, zeros)
            elif isinstance(module, nn.Embedding):
                init(module.weight, normal)
            elif isinstance(module, Qwen3_5RMSNorm):
                init(module.weight, zeros)
            elif isinstance(module, Qwen3_5RMSNormGated):
                init(module.weight, ones)
            elif isinstance(module, Qwen3_5GatedDeltaNet):
                for w in (module.conv_q_weight, module.conv_k_weight, module.conv_v_weight):
                    init(w, normal)
                init(module.dt_bias, ones)
                init(module.A_log, lambda t: t.copy_(sample_A_log(t.shape, t.device)))
            elif isinstance(module, nn.LayerNorm):  # the vision tower's
                init(module.weight, ones)
                init(module.bias, zeros)
            elif isinstance(module, (Qwen3_5RotaryEmbedding, Qwen3_5VisionRotaryEmbedding)):
                for live in copies:
                    live.reset_inv_freq(buffer_device)
            else:
                self._init_extra(module, copies[0] if copies else None, init, normal, zeros)
        missed = [n for n, ps in live_params.items() if any(id(p) not in filled for p in ps)]
        if missed:  # a new parameter type without an init rule must not stay uninitialised
            raise RuntimeError(f"init_weights has no rule for parameters: {missed}")

    def _init_extra(self, module: nn.Module, live: nn.Module | None, init: Callable,
                    normal: Callable, zeros: Callable) -> None:
        """Init rules for module types only a subclass has: ``init(param, fill)`` draws a
        parameter of ``module`` (this model's) once, in module order, into the parts that hold
        it; ``live`` is the module a part holds under the same name (None: another stage's),
        for buffers set without the RNG. The dense model has none."""


def _local_device(param: torch.Tensor) -> torch.device:
    return param.to_local().device if isinstance(param, DTensor) else param.device


def _copy_full(target: torch.Tensor, source: torch.Tensor) -> None:
    """``target`` := ``source`` where both hold one weight (the same draw on two parts)."""
    full = source.full_tensor() if isinstance(source, DTensor) else source
    _init_tensor(target, lambda t: t.copy_(full))


def _init_tensor(param: torch.Tensor, fill: Callable[[torch.Tensor], None]) -> None:
    """Fill ``param`` in place; for a DTensor, fill a full-size tensor and keep the local shard."""
    if param.is_meta:
        raise RuntimeError(
            "init_weights: parameters are on the meta device; call model.to_empty(device=...) first."
        )
    if not isinstance(param, DTensor):
        fill(param)
        return
    local = param.to_local()
    full = torch.empty(param.shape, dtype=param.dtype, device=local.device)
    fill(full)
    # src_data_rank=None: every rank holds the same full tensor, so slice locally, no collective.
    shard = distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None)
    local.copy_(shard.to_local())


# ---------------------------------------------------------------------- size & FLOPs
def count_params(model: nn.Module, exclude_embeddings: bool = False) -> int:
    """Unique parameters of ``model`` (tied weights counted once; DTensors at their global size).

    ``exclude_embeddings`` drops the input embedding table (a lookup, not a matmul).
    """
    seen: set[int] = set()
    total = 0
    embed_ids = set()
    if exclude_embeddings:
        embed_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    for p in model.parameters():
        if id(p) in seen or id(p) in embed_ids:
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def param_count_from_config(config: Qwen3_5Config) -> dict[str, int]:
    """Parameter counts derived from the config alone (no model needed).

    Returns ``embedding``, ``lm_head`` (0 when tied), ``layers`` and ``total`` (unique params).
    """
    h = config.hidden_size
    bias = int(config.attention_bias)
    hd, hq, hkv = config.head_dim, config.num_attention_heads, config.num_key_value_heads
    q_out = hq * hd * (2 if config.attn_output_gate else 1)
    attn = h * q_out + 2 * h * hkv * hd + hq * hd * h + 2 * hd
    attn += bias * (q_out + 2 * hkv * hd + h)
    kd, vd, hv = config.linear_key_dim, config.linear_value_dim, config.linear_num_value_heads
    kernel = config.linear_conv_kernel_dim
    gdn = h * (2 * kd + 2 * vd + 2 * hv) + (2 * kd + vd) * kernel + 2 * hv
    gdn += config.linear_value_head_dim + vd * h
    mlp = 3 * h * config.intermediate_size
    per_layer_common = mlp + 2 * h
    layers = sum(
        per_layer_common + (attn if t == FULL_ATTENTION else gdn) for t in config.layer_types
    )
    embedding = config.vocab_size * h
    lm_head = 0 if config.tie_word_embeddings else config.vocab_size * h
    return {
        "embedding": embedding,
        "lm_head": lm_head,
        "layers": layers,
        "total": embedding + lm_head + layers + h,  # + final norm
    }


def token_mixing_flops_per_token(config: Qwen3_5Config, seq_len: int) -> float:
    """Training FLOPs per token of the weight-free token mixing, which ``6 * N`` misses.

    * full-attention layers: ``12 * H * head_dim * seq_len`` each (QK^T and AV, forward 4, x3;
      torchtitan's convention: no discount for the causal mask);
    * Gated DeltaNet layers: ``18 * Hv * Dk * Dv`` each (recurrent form: read ``S^T k``, write
      ``k delta^T``, output ``S^T q`` = 6 per token forward, x3); the chunked kernel's extra
      intra-chunk work is an implementation cost, not model FLOPs.
    """
    attn = 12 * config.num_attention_heads * config.head_dim * seq_len
    gdn = (
        18
        * config.linear_num_value_heads
        * config.linear_key_head_dim
        * config.linear_value_head_dim
    )
    return float(
        config.num_full_attention_layers * attn + config.num_linear_attention_layers * gdn
    )


def flops_per_token(config: Qwen3_5Config, seq_len: int) -> float:
    """Training (forward + backward) model FLOPs per token, for MFU logging.

    ``6 * N`` counts one multiply-add (2 FLOPs) per weight per token forward and twice that
    backward, where ``N`` is every weight used in a matmul or conv: all parameters except the
    embedding lookup table, with the ``lm_head`` matmul counted once -- as its own weight when
    untied, as the embedding's when tied. Plus :func:`token_mixing_flops_per_token`.
    """
    counts = param_count_from_config(config)
    lm_head_matmul = config.vocab_size * config.hidden_size
    # An untied lm_head is already in counts["total"]; a tied one shares the embedding's weight,
    # which is left out as a lookup table, so its matmul is added back.
    matmul_params = counts["total"] - counts["embedding"] + (
        lm_head_matmul if config.tie_word_embeddings else 0
    )
    return float(6 * matmul_params) + token_mixing_flops_per_token(config, seq_len)
