"""Stand-in for MiniCPM-2B's remote ``modeling_minicpm.py``, written for edumas tests (not copied).

It keeps the traits of the real code that matter to fine-tuning under transformers 5 and trl 1.16:

- the head scales the width: ``logits = lm_head(hidden / (hidden_size / dim_model_base))``, then
  ``.float()``; nothing in the config names that scale the way trl's fused head reads scales;
- embeddings are multiplied by ``scale_emb``, each residual branch by ``scale_depth / sqrt(layers)``;
- tied input/output embeddings declared the transformers-4 way, ``_tied_weights_keys = ["lm_head.weight"]``
  (a list; transformers 5 expects a ``{target: source}`` mapping), and ``post_init`` is called;
- it imports the names the real file imports from transformers, ``is_torch_fx_available`` among them
  (removed in transformers 5; edumas re-adds it), and builds the legacy cache when ``use_cache`` is on
  (``DynamicCache.from_legacy_cache``, gone in transformers 5): callers must pass ``use_cache=False``;
- rotary tables in non-persistent buffers (``MiniCPMRotaryEmbedding``): transformers 5 re-creates such buffers
  uninitialised after loading, and MiniCPM's ``_init_weights`` does not recompute them;
- ``base_model_prefix = "model"``, SDPA attention with a 4-D causal mask, no ``**kwargs`` in ``forward``;
  no ``GenerationMixin`` base but its own ``prepare_inputs_for_generation`` (transformers adds the mixin).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache  # noqa: F401
from transformers.modeling_attn_mask_utils import _prepare_4d_causal_attention_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import PreTrainedModel
from transformers.pytorch_utils import ALL_LAYERNORM_LAYERS, is_torch_greater_or_equal_than_1_13  # noqa: F401
from transformers.utils import is_flash_attn_2_available, is_flash_attn_greater_or_equal_2_10, logging  # noqa: F401
from transformers.utils.import_utils import is_torch_fx_available

from .configuration_minicpm import MiniCPMConfig

logger = logging.get_logger(__name__)
FX_TRACEABLE = is_torch_fx_available()


class MiniCPMRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        return (hidden_states * torch.rsqrt(variance + self.variance_epsilon)).to(hidden_states.dtype) * self.weight


class MiniCPMRotaryEmbedding(nn.Module):
    """Rotary tables as the real code keeps them: ``inv_freq``, ``cos_cached`` and ``sin_cached``, all
    non-persistent buffers (computed in ``__init__``, not in the checkpoint)."""

    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.max_seq_len_cached = max_position_embeddings
        angles = torch.outer(torch.arange(max_position_embeddings, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos_cached", angles.cos(), persistent=False)
        self.register_buffer("sin_cached", angles.sin(), persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class MiniCPMAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // self.heads
        self.q_proj = nn.Linear(config.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)
        self.rotary_emb = MiniCPMRotaryEmbedding(self.head_dim, config.max_position_embeddings, config.rope_theta)

    def forward(self, hidden_states, attention_mask, position_ids):
        batch, seq, _ = hidden_states.shape
        query = self.q_proj(hidden_states).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        key = self.k_proj(hidden_states).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        value = self.v_proj(hidden_states).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(value, seq_len=seq)
        cos, sin = cos.float()[position_ids].unsqueeze(1), sin.float()[position_ids].unsqueeze(1)
        query = (query.float() * cos + rotate_half(query.float()) * sin).to(value.dtype)
        key = (key.float() * cos + rotate_half(key.float()) * sin).to(value.dtype)
        repeat = self.heads // self.kv_heads
        key, value = key.repeat_interleave(repeat, dim=1), value.repeat_interleave(repeat, dim=1)
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask)
        return self.o_proj(context.transpose(1, 2).reshape(batch, seq, -1))


class MiniCPMMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class MiniCPMDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = MiniCPMAttention(config, layer_idx)
        self.mlp = MiniCPMMLP(config)
        self.input_layernorm = MiniCPMRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = MiniCPMRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.residual_scale = config.scale_depth / math.sqrt(config.num_hidden_layers)

    def forward(self, hidden_states, attention_mask, position_ids):
        attention = self.self_attn(self.input_layernorm(hidden_states), attention_mask, position_ids)
        hidden_states = hidden_states + attention * self.residual_scale
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states)) * self.residual_scale


class MiniCPMPreTrainedModel(PreTrainedModel):
    config_class = MiniCPMConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["MiniCPMDecoderLayer"]
    _supports_flash_attn_2 = True
    _supports_sdpa = True

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=std)


class MiniCPMModel(MiniCPMPreTrainedModel):
    def __init__(self, config: MiniCPMConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList([MiniCPMDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = MiniCPMRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(
        self,
        input_ids: torch.LongTensor = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: list[torch.FloatTensor] | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict
        batch, seq = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        if use_cache:
            past_key_values = DynamicCache.from_legacy_cache(past_key_values)  # transformers 4.x API
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids) * self.config.scale_emb
        if position_ids is None:
            position_ids = torch.arange(seq, dtype=torch.long, device=inputs_embeds.device).unsqueeze(0)
        mask = _prepare_4d_causal_attention_mask(attention_mask, (batch, seq), inputs_embeds, 0)
        hidden_states = inputs_embeds
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden_states = torch.utils.checkpoint.checkpoint(
                    layer, hidden_states, mask, position_ids, use_reentrant=False
                )
            else:
                hidden_states = layer(hidden_states, mask, position_ids)
        hidden_states = self.norm(hidden_states)
        if not return_dict:
            return (hidden_states,)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states)


class MiniCPMForCausalLM(MiniCPMPreTrainedModel):
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, config):
        super().__init__(config)
        self.model = MiniCPMModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def get_decoder(self):
        return self.model

    def forward(
        self,
        input_ids: torch.LongTensor = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: list[torch.FloatTensor] | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ):
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            return_dict=True,
        )
        hidden_states = outputs.last_hidden_state
        logits = self.lm_head(hidden_states / (self.config.hidden_size / self.config.dim_model_base)).float()
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, self.config.vocab_size), labels[..., 1:].reshape(-1))
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None, **kwargs):
        position_ids = None
        if attention_mask is not None:
            position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
        return {"input_ids": input_ids, "position_ids": position_ids, "past_key_values": past_key_values,
                "use_cache": kwargs.get("use_cache"), "attention_mask": attention_mask}  # fmt: skip
