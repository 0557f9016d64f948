"""tandem's MTP head: a DeepSeek-V3-style next-token module on top of a frozen Llama target.

This file is the executable definition of the format in docs/formats.md ("MTP head"); the
training, the export and the acceptance simulation in train.py all go through it.

Step t of the module takes the target's final hidden state h_t (the output of the target's
final RMSNorm, i.e. transformers' `last_hidden_state`, the vector the LM head turns into the
logits that predicted x_{t+1}) and the token x_{t+1}:

    u_{t+1} = eh_proj(concat[enorm(Embed(x_{t+1})), hnorm(h_t)])     (embedding first)
    o_{t+1} = final_norm(Block(u)_{t+1})   one causal Llama decoder block over the u's,
                                            RoPE position of u_{t+1} is t+1
    logits  = target_lm_head(o_{t+1})      predicts x_{t+2}

Embed and the LM head are the target's (not stored here). To draft further, the module is
applied recursively: (o_{t+1}, drafted x_{t+2}) -> u_{t+2} at position t+2, and so on; every
entry, real or recursive, stays in the block's causal context (its KV cache).

Tensor names (model.safetensors): enorm.weight, hnorm.weight, eh_proj.weight [H, 2H],
layer.input_layernorm.weight, layer.self_attn.{q,k,v,o}_proj.weight,
layer.post_attention_layernorm.weight, layer.mlp.{gate,up,down}_proj.weight, final_norm.weight.

Only torch is needed (no transformers), so the module can be checked anywhere.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG_KEYS = (
    "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "rms_norm_eps", "rope_theta", "max_position_embeddings", "vocab_size",
)


def make_config(target_config, intermediate_size=None, draft_block_size=4):
    """MTP config dict derived from a transformers LlamaConfig (or a dict with its fields)."""
    get = (lambda k, d=None: target_config.get(k, d)) if isinstance(target_config, dict) else \
        (lambda k, d=None: getattr(target_config, k, d))
    hidden = get("hidden_size")
    heads = get("num_attention_heads")
    theta = get("rope_theta")
    if theta is None:
        rp = get("rope_parameters") or {}
        theta = rp.get("rope_theta", 10000.0)
    head_dim = get("head_dim") or hidden // heads
    return {
        "architectures": ["TandemMTPHead"],
        "model_type": "tandem_mtp",
        "hidden_size": hidden,
        "intermediate_size": intermediate_size or get("intermediate_size"),
        "num_attention_heads": heads,
        "num_key_value_heads": get("num_key_value_heads") or heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": get("rms_norm_eps"),
        "rope_theta": float(theta),
        "max_position_embeddings": get("max_position_embeddings"),
        "vocab_size": get("vocab_size"),
        "num_nextn_predict_layers": 1,
        "target_model_type": "llama",
        "torch_dtype": "bfloat16",
        "draft_block_size": draft_block_size,
    }


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(positions, head_dim, theta, dtype):
    """positions: [L] or [B, L] integer tensor -> cos, sin [.., L, head_dim] (HF Llama 'default')."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, hd = cfg["hidden_size"], cfg["head_dim"]
        self.n_heads, self.n_kv, self.head_dim = cfg["num_attention_heads"], cfg["num_key_value_heads"], hd
        self.theta = cfg["rope_theta"]
        self.q_proj = nn.Linear(h, self.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(h, self.n_kv * hd, bias=False)
        self.v_proj = nn.Linear(h, self.n_kv * hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * hd, h, bias=False)

    def forward(self, x, positions, allow):
        """x [B, L, H]; positions [L] or [B, L]; allow: None (causal) or bool [L, L], True = may attend."""
        b, l, _ = x.shape
        q = self.q_proj(x).view(b, l, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, l, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, l, self.n_kv, self.head_dim).transpose(1, 2)
        cos, sin = rope_cos_sin(positions, self.head_dim, self.theta, q.dtype)
        if cos.dim() == 3:  # per-batch positions
            cos, sin = cos[:, None], sin[:, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.n_heads // self.n_kv
        if rep > 1:  # kv head j serves query heads j*rep .. (j+1)*rep-1 (transformers' repeat_kv)
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention") and x.is_cuda:
            if allow is None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allow)
        else:
            if allow is None:
                allow = torch.ones(l, l, dtype=torch.bool, device=x.device).tril()  # eager, softmax in float32 like transformers' eager path
            scores = (q @ k.transpose(-1, -2)).float() * (self.head_dim ** -0.5)
            scores = scores.masked_fill(~allow, float("-inf"))
            out = torch.softmax(scores, dim=-1).to(v.dtype) @ v
        out = out.transpose(1, 2).reshape(b, l, self.n_heads * self.head_dim)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A Llama decoder block (pre-norm attention + SwiGLU MLP), same maths as transformers'."""

    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, x, positions, allow=None):
        x = x + self.self_attn(self.input_layernorm(x), positions, allow)
        return x + self.mlp(self.post_attention_layernorm(x))


class TandemMTPHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = dict(cfg)
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.enorm = RMSNorm(h, eps)
        self.hnorm = RMSNorm(h, eps)
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.layer = DecoderLayer(cfg)
        self.final_norm = RMSNorm(h, eps)

    def init_weights(self, std=0.02, seed=None):
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight") or "layernorm" in name:
                    p.fill_(1.0)
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    def fuse(self, emb_next, h):
        """emb_next = Embed(x_{t+1}), h = h_t (both [.., H]) -> u_{t+1}."""
        return self.eh_proj(torch.cat([self.enorm(emb_next), self.hnorm(h)], dim=-1))

    def run_block(self, u, positions, allow=None):
        """u [B, L, H] -> o = final_norm(block(u)) [B, L, H]; causal unless `allow` is given."""
        return self.final_norm(self.layer(u, positions, allow))

    def forward(self, h, emb_next, positions=None):
        """Depth 1 over a whole sequence: h [B, L, H] = h_0..h_{L-1}, emb_next = Embed(x_1..x_L).

        Returns o [B, L, H]; o[:, t] (position t+1) is the state whose LM-head logits predict x_{t+2}.
        """
        if positions is None:
            positions = torch.arange(1, h.shape[1] + 1, device=h.device)
        return self.run_block(self.fuse(emb_next, h), positions)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    def save(self, path, dtype=torch.bfloat16):
        from safetensors.torch import save_file
        os.makedirs(path, exist_ok=True)
        state = {k: v.detach().to(dtype).contiguous().cpu() for k, v in self.state_dict().items()}
        save_file(state, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        cfg = dict(self.config)
        cfg["torch_dtype"] = str(dtype).replace("torch.", "")
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")

    @classmethod
    def load(cls, path, dtype=torch.float32, device="cpu"):
        from safetensors.torch import load_file
        with open(os.path.join(path, "config.json")) as f:
            cfg = json.load(f)
        head = cls(cfg)
        state = load_file(os.path.join(path, "model.safetensors"))
        head.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True)
        return head.to(device=device, dtype=dtype).eval()


def two_depth_allow(l1, l2, device):
    """Attention mask for training depth 1 and depth 2 in one pass over concat[u1 (l1), u2 (l2)].

    u1[t] sits at position t+1 and sees u1[s] for s <= t (plain causal). u2[t] (the recursive
    entry built from o1[t] and x_{t+2}, position t+2) sees u1[s] for s <= t and itself: exactly
    the context it has when drafting (real entries up to position t+1, then the recursive one).
    """
    allow = torch.zeros(l1 + l2, l1 + l2, dtype=torch.bool, device=device)
    allow[:l1, :l1] = torch.ones(l1, l1, dtype=torch.bool, device=device).tril()
    allow[l1:, :l1] = torch.ones(l2, l1, dtype=torch.bool, device=device).tril()
    allow[l1:, l1:] = torch.eye(l2, dtype=torch.bool, device=device)
    return allow


def train_outputs(head, h, x, embed, depth2=True):
    """Teacher-forced outputs on frozen-target hidden states.

    h [B, T, H] target final hidden states for tokens x [B, T]. Returns (o1, o2):
      o1 [B, T-1, H]: o1[:, t] from (h_t, x_{t+1}) -> its logits predict x_{t+2}
      o2 [B, T-2, H]: o2[:, t] from (o1[:, t], x_{t+2}) -> its logits predict x_{t+3}  (or None)
    """
    t_len = x.shape[1]
    e = embed(x)
    u1 = head.fuse(e[:, 1:], h[:, :-1])
    pos1 = torch.arange(1, t_len, device=x.device)
    o1 = head.run_block(u1, pos1)
    if not depth2:
        return o1, None
    u2 = head.fuse(e[:, 2:], o1[:, :-1])
    pos2 = torch.arange(2, t_len, device=x.device)
    l1, l2 = u1.shape[1], u2.shape[1]
    o = head.run_block(torch.cat([u1, u2], dim=1), torch.cat([pos1, pos2]), two_depth_allow(l1, l2, x.device))
    return o1, o[:, l1:]


@torch.no_grad()
def draft(head, embed, lm_head, h_prev, x_ctx, n_draft):
    """Greedy recursive drafting, recomputed from scratch (what a KV cache would hold).

    x_ctx [B, n]: context tokens x_0..x_{n-1}, the last one being the token the target just
    produced; h_prev [B, n-1, H]: the target's final hidden states h_0..h_{n-2}.
    Returns (tokens [B, n_draft], logits [B, n_draft, V]).
    """
    n = x_ctx.shape[1]
    u = head.fuse(embed(x_ctx[:, 1:]), h_prev)
    pos = torch.arange(1, n, device=x_ctx.device)
    toks, logits_out = [], []
    for k in range(n_draft):
        o_last = head.run_block(u, pos)[:, -1]
        logits = lm_head(o_last).float()
        d = logits.argmax(-1)
        toks.append(d)
        logits_out.append(logits)
        u = torch.cat([u, head.fuse(embed(d)[:, None], o_last[:, None])], dim=1)
        pos = torch.cat([pos, pos[-1:] + 1])
    return torch.stack(toks, 1), torch.stack(logits_out, 1)
