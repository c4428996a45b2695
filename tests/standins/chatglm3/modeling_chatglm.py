"""Stand-in for chatglm3-6b's remote ``modeling_chatglm.py``, written for edumas tests (not copied).

It keeps the traits of the real code that matter to fine-tuning under transformers 5 and trl 1.16:

- no ``lm_head``: the head is ``transformer.output_layer``, applied by ``ChatGLMForConditionalGeneration``
  after the backbone; ``get_output_embeddings`` is not defined, so transformers' default returns None;
- hidden states are sequence-first (``[seq, batch, hidden]``) from the embedding onwards; the backbone's
  ``last_hidden_state`` is sequence-first and only the causal-LM forward transposes the logits;
- ``base_model_prefix = "transformer"``; the classes never call ``post_init`` (the real ones do not);
- ``empty_init=True`` (the default) builds the embedding, encoder and output layer with
  ``torch.nn.utils.skip_init`` (on the meta device, then ``to_empty``); ``empty_init=False`` builds
  them normally, as ChatGLM3's own fine-tuning code asks for;
- fused ``query_key_value`` with multi-query groups, RMSNorm, SwiGLU MLP, rotary embedding on half of
  each head, its own boolean attention masks from ``get_masks`` (True = masked) and default
  position ids ``0..seq-1``; the forward takes no ``**kwargs``; no ``GenerationMixin`` base but its own
  ``prepare_inputs_for_generation`` (transformers adds the mixin to remote classes that have one).
"""


import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init
from transformers.generation.logits_process import LogitsProcessor  # noqa: F401  (imported by the real file)
from transformers.generation.utils import GenerationConfig, ModelOutput  # noqa: F401
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import PreTrainedModel

from .configuration_chatglm import ChatGLMConfig


def default_init(cls, *args, **kwargs):
    return cls(*args, **kwargs)


def _dtype_kwargs(config):
    return {"dtype": config.torch_dtype}


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size, device=device, dtype=dtype))
        self.eps = eps

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        return (self.weight * (hidden_states * torch.rsqrt(variance + self.eps))).to(hidden_states.dtype)


class RotaryEmbedding(nn.Module):
    """Cos/sin table ``[seq, rot_dim / 2, 2]`` for the first ``rot_dim`` dims of each head."""

    def __init__(self, rot_dim, device=None, dtype=None):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, rot_dim, 2, device=device).float() / rot_dim))
        self.register_buffer("inv_freq", inv_freq.to(dtype) if dtype is not None else inv_freq)
        self.rot_dim = rot_dim

    def forward(self, max_seq_len):
        positions = torch.arange(max_seq_len, dtype=torch.float, device=self.inv_freq.device)
        angles = torch.outer(positions, self.inv_freq.float())
        return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)


def apply_rotary(x, table):
    """``x``: ``[seq, batch, heads, head_dim]``; ``table``: ``[seq, batch, rot_dim / 2, 2]``."""
    rot_dim = table.shape[-2] * 2
    rotated, passed = x[..., :rot_dim], x[..., rot_dim:]
    pairs = rotated.reshape(*rotated.shape[:-1], rot_dim // 2, 2)
    cos, sin = table[..., 0].unsqueeze(2), table[..., 1].unsqueeze(2)
    out = torch.stack([pairs[..., 0] * cos - pairs[..., 1] * sin, pairs[..., 1] * cos + pairs[..., 0] * sin], -1)
    return torch.cat([out.flatten(-2).to(x.dtype), passed], dim=-1)


class SelfAttention(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.heads = config.num_attention_heads
        self.head_dim = config.kv_channels
        self.projection = self.heads * self.head_dim
        self.groups = config.multi_query_group_num if config.multi_query_attention else self.heads
        qkv = self.projection + 2 * self.head_dim * self.groups
        bias = config.add_bias_linear or config.add_qkv_bias
        self.query_key_value = nn.Linear(config.hidden_size, qkv, bias=bias, device=device, **_dtype_kwargs(config))
        self.dense = nn.Linear(
            self.projection, config.hidden_size, bias=config.add_bias_linear, device=device, **_dtype_kwargs(config)
        )

    def forward(self, hidden_states, attention_mask, rotary_pos_emb):
        seq, batch = hidden_states.shape[:2]
        mixed = self.query_key_value(hidden_states)
        kv = self.head_dim * self.groups
        query, key, value = mixed.split([self.projection, kv, kv], dim=-1)
        query = apply_rotary(query.view(seq, batch, self.heads, self.head_dim), rotary_pos_emb)
        key = apply_rotary(key.view(seq, batch, self.groups, self.head_dim), rotary_pos_emb)
        value = value.view(seq, batch, self.groups, self.head_dim)
        repeat = self.heads // self.groups
        key, value = key.repeat_interleave(repeat, dim=2), value.repeat_interleave(repeat, dim=2)
        query, key, value = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [batch, heads, seq, dim]
        if attention_mask is None:
            context = F.scaled_dot_product_attention(query, key, value, is_causal=True)
        else:
            context = F.scaled_dot_product_attention(query, key, value, ~attention_mask)
        context = context.permute(2, 0, 1, 3).reshape(seq, batch, self.projection)
        return self.dense(context)


class MLP(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(
            config.hidden_size, config.ffn_hidden_size * 2, bias=config.add_bias_linear, device=device,
            **_dtype_kwargs(config),
        )  # fmt: skip
        self.dense_4h_to_h = nn.Linear(
            config.ffn_hidden_size, config.hidden_size, bias=config.add_bias_linear, device=device,
            **_dtype_kwargs(config),
        )  # fmt: skip

    def forward(self, hidden_states):
        gate, up = self.dense_h_to_4h(hidden_states).chunk(2, dim=-1)
        return self.dense_4h_to_h(F.silu(gate) * up)


class GLMBlock(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        eps, dtype = config.layernorm_epsilon, config.torch_dtype
        self.input_layernorm = RMSNorm(config.hidden_size, eps=eps, device=device, dtype=dtype)
        self.self_attention = SelfAttention(config, device=device)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=eps, device=device, dtype=dtype)
        self.mlp = MLP(config, device=device)
        self.hidden_dropout = config.hidden_dropout

    def forward(self, hidden_states, attention_mask, rotary_pos_emb):
        attention = self.self_attention(self.input_layernorm(hidden_states), attention_mask, rotary_pos_emb)
        hidden_states = hidden_states + F.dropout(attention, p=self.hidden_dropout, training=self.training)
        mlp = self.mlp(self.post_attention_layernorm(hidden_states))
        return hidden_states + F.dropout(mlp, p=self.hidden_dropout, training=self.training)


class GLMTransformer(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.layers = nn.ModuleList([GLMBlock(config, device=device) for _ in range(config.num_layers)])
        self.final_layernorm = RMSNorm(
            config.hidden_size, eps=config.layernorm_epsilon, device=device, dtype=config.torch_dtype
        )
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask, rotary_pos_emb):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden_states = torch.utils.checkpoint.checkpoint(
                    layer, hidden_states, attention_mask, rotary_pos_emb, use_reentrant=False
                )
            else:
                hidden_states = layer(hidden_states, attention_mask, rotary_pos_emb)
        return self.final_layernorm(hidden_states)


class ChatGLMPreTrainedModel(PreTrainedModel):
    is_parallelizable = False
    supports_gradient_checkpointing = True
    config_class = ChatGLMConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["GLMBlock"]

    def _init_weights(self, module):
        return  # the real code leaves weights to the checkpoint

    def get_masks(self, input_ids, padding_mask=None):
        """``[batch, 1, seq, seq]`` booleans, True where attention is masked (causal + left padding)."""
        batch, seq = input_ids.shape
        mask = torch.ones(batch, seq, seq, device=input_ids.device).tril_()
        if padding_mask is not None:
            mask = mask * padding_mask.unsqueeze(1)
            mask -= padding_mask.unsqueeze(-1) - 1  # padded query rows see everything (no all-masked row)
        return (mask < 0.5).bool().unsqueeze(1)

    def get_position_ids(self, input_ids, device):
        batch, seq = input_ids.shape
        return torch.arange(seq, dtype=torch.long, device=device).unsqueeze(0).repeat(batch, 1)

    def _set_gradient_checkpointing(self, module, value=False):
        if isinstance(module, GLMTransformer):
            module.gradient_checkpointing = value


class Embedding(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.padded_vocab_size, config.hidden_size, dtype=config.torch_dtype, device=device
        )

    def forward(self, input_ids):
        return self.word_embeddings(input_ids).transpose(0, 1).contiguous()  # [batch, seq, h] -> [seq, batch, h]


class ChatGLMModel(ChatGLMPreTrainedModel):
    def __init__(self, config, device=None, empty_init=True):
        super().__init__(config)
        init_method = skip_init if empty_init else default_init
        init_kwargs = {"device": device} if device is not None else {}
        self.embedding = init_method(Embedding, config, **init_kwargs)
        self.seq_length = config.seq_length
        self.rotary_pos_emb = RotaryEmbedding(config.kv_channels // 2, device=device, dtype=config.torch_dtype)
        self.encoder = init_method(GLMTransformer, config, **init_kwargs)
        self.output_layer = init_method(
            nn.Linear, config.hidden_size, config.padded_vocab_size, bias=False, dtype=config.torch_dtype,
            **init_kwargs,
        )  # fmt: skip

    def get_input_embeddings(self):
        return self.embedding.word_embeddings

    def forward(
        self,
        input_ids,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        full_attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ):
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict
        seq = input_ids.shape[1]
        if inputs_embeds is None:
            inputs_embeds = self.embedding(input_ids)
        if full_attention_mask is None and attention_mask is not None and not attention_mask.all():
            full_attention_mask = self.get_masks(input_ids, padding_mask=attention_mask)
        rotary = self.rotary_pos_emb(self.seq_length)
        rotary = rotary[position_ids] if position_ids is not None else rotary[None, :seq]
        rotary = rotary.transpose(0, 1).contiguous()  # [seq, batch, rot/2, 2]
        hidden_states = self.encoder(inputs_embeds, full_attention_mask, rotary)
        if not return_dict:
            return (hidden_states,)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states)


class ChatGLMForConditionalGeneration(ChatGLMPreTrainedModel):
    def __init__(self, config: ChatGLMConfig, empty_init=True, device=None):
        super().__init__(config)
        self.max_sequence_length = config.seq_length
        self.transformer = ChatGLMModel(config, empty_init=empty_init, device=device)
        self.config = config

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        return_last_logit: bool | None = False,
    ):
        outputs = self.transformer(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            return_dict=True,
        )
        hidden_states = outputs.last_hidden_state
        if return_last_logit:
            hidden_states = hidden_states[-1:]
        logits = self.transformer.output_layer(hidden_states).transpose(0, 1).contiguous()  # -> [batch, seq, vocab]
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].float()
            loss = F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), labels[..., 1:].reshape(-1))
            loss = loss.to(hidden_states.dtype)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None, position_ids=None,
                                      use_cache=None, **kwargs):  # fmt: skip
        if position_ids is None:
            position_ids = self.get_position_ids(input_ids, device=input_ids.device)
        return {"input_ids": input_ids, "past_key_values": past_key_values, "position_ids": position_ids,
                "attention_mask": attention_mask, "return_last_logit": True, "use_cache": use_cache}  # fmt: skip

