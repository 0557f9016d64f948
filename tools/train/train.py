#!/usr/bin/env python3
"""Trains tandem's bundled models: tokenizer, Llama target, Llama draft, MTP head.

Input: the corpus written by prepare_corpus.mjs (train.txt / val.txt, documents separated by
a line holding only <|endoftext|>). Output under --out:

  models/tandem-target/   LlamaForCausalLM (bf16) + tokenizer + generation_config
                          + reference.json / reference.safetensors (golden logits, the
                          format of tests/fixtures/README.md)
  models/tandem-draft/    LlamaForCausalLM (bf16), distilled from the target, same tokenizer
  models/tandem-mtp/      MTP head (docs/formats.md "MTP head"; mtp.py) trained on the frozen
                          target + reference.json / reference.safetensors
  metrics.json            sizes, timings, validation losses, acceptance simulation
  train.log               everything printed

Needs a CUDA GPU (bf16 autocast), torch, transformers (5.x), tokenizers, safetensors.
`--smoke` runs the whole pipeline on tiny models and a slice of the data in about a minute.

Usage: python3 train.py --data data --out runs/main
"""
import argparse
import copy
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mtp as mtp_lib  # noqa: E402

SEP = "\n<|endoftext|>\n"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOT, IM_START, IM_END = 0, 1, 2
# Qwen2 / GPT-4 style pre-tokenization split (single digits), then byte-level mapping.
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

LOG = None


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    if LOG:
        LOG.write(s + "\n")
        LOG.flush()


# ----------------------------------------------------------------------------- data + tokenizer

def read_docs(path, limit_bytes=0):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if limit_bytes:
        text = text[:limit_bytes]
    return [d.strip() for d in text.split(SEP) if d.strip()]


def train_tokenizer(docs, vocab_size):
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def tokenizer_config(max_len):
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True} for i, s in enumerate(SPECIALS)},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def save_tokenizer(tok, path, max_len):
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(max_len), f, indent=2, ensure_ascii=False)
        f.write("\n")


def clip(text, n, sentence=False):
    if len(text) <= n:
        return text
    cut = text[:n]
    if sentence:
        j = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
        if j > n // 3:
            return cut[:j + 1]
    j = cut.rfind(" ")
    return cut[:j] if j > n // 3 else cut


def chat_samples(docs, n, rng):
    """ChatML samples from consecutive paragraphs: the user gives one, the assistant continues."""
    import re
    pairs = []
    for d in docs:
        paras = []
        for p in d.split("\n\n"):
            p = p.strip()
            if len(p) <= 600:
                paras.append(p)
                continue
            chunk = ""  # long paragraphs (the addresses have none) -> runs of sentences
            for sent in re.split(r"(?<=[.!?])\s+", p):
                chunk = f"{chunk} {sent}".strip()
                if len(chunk) > 300:
                    paras.append(chunk)
                    chunk = ""
            if chunk:
                paras.append(chunk)
        paras = [p for p in paras if len(p) > 80]
        pairs.extend(zip(paras, paras[1:]))
    rng.shuffle(pairs)
    out = []
    for a, b in pairs[:n]:
        out.append(f"<|im_start|>user\n{clip(a, 400)}<|im_end|>\n"
                   f"<|im_start|>assistant\n{clip(b, 700, sentence=True)}<|im_end|>\n")
    return out


def encode_stream(tok, docs):
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(EOT)
    return np.asarray(ids, dtype=np.int64)


# ----------------------------------------------------------------------------- models

def llama_config(vocab, hidden, layers, heads, kv_heads, inter, max_pos, tie=True):
    import transformers
    kw = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
              num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
              max_position_embeddings=max_pos, rms_norm_eps=1e-5, tie_word_embeddings=tie,
              bos_token_id=EOT, eos_token_id=EOT, pad_token_id=EOT, attention_dropout=0.0)
    if int(transformers.__version__.split(".")[0]) >= 5:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    else:
        kw["rope_theta"] = 10000.0
    return transformers.LlamaConfig(**kw)


def new_llama(cfg, seed):
    import transformers
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg)
    return model


def n_params(model):
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def add_resid_dropout(model, p):
    """Residual dropout (GPT-2 style) on each attention and MLP output; active only in train()."""
    hooks = []
    if p <= 0:
        return hooks
    for name, mod in model.named_modules():
        if name.endswith("self_attn.o_proj") or name.endswith("mlp.down_proj"):
            hooks.append(mod.register_forward_hook(lambda m, i, o: F.dropout(o, p, m.training)))
    return hooks


def to_classic_config(path):
    """config.json in the classic form (rope_theta / rope_scaling / torch_dtype), like the fixtures."""
    p = os.path.join(path, "config.json")
    with open(p) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters", None)
    if rp is not None:
        rp = dict(rp)
        cfg["rope_theta"] = rp.pop("rope_theta")
        cfg["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    cfg["torch_dtype"] = "bfloat16"
    cfg.pop("layer_types", None)
    with open(p, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def export_llama(model, path, tok_dir, max_new_tokens=256):
    import shutil
    import transformers
    os.makedirs(path, exist_ok=True)
    m = copy.deepcopy(model).to(torch.bfloat16).cpu()
    m.config.use_cache = True
    m.save_pretrained(path)
    to_classic_config(path)
    gen = {"bos_token_id": EOT, "eos_token_id": [EOT, IM_END], "pad_token_id": EOT,
           "max_new_tokens": max_new_tokens, "transformers_version": transformers.__version__}
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
        f.write("\n")
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, fn), os.path.join(path, fn))
    del m


def load_llama(path, device, dtype=torch.float32, attn="sdpa"):
    import transformers
    kw = {"dtype": dtype} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": dtype}
    m = transformers.LlamaForCausalLM.from_pretrained(path, attn_implementation=attn, **kw)
    return m.to(device).eval()


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


# ----------------------------------------------------------------------------- training loop

class Batches:
    def __init__(self, stream, seq, batch, device, seed):
        self.s = torch.from_numpy(stream).to(device)
        self.seq, self.batch = seq, batch
        self.g = torch.Generator(device=device).manual_seed(seed)
        self.ar = torch.arange(seq + 1, device=device)

    def __call__(self):
        idx = torch.randint(0, self.s.numel() - self.seq - 1, (self.batch,), device=self.s.device, generator=self.g)
        return self.s[idx[:, None] + self.ar]


def val_windows(stream, seq, device, max_windows):
    n = (len(stream) - 1) // seq
    n = min(n, max_windows)
    rows = [stream[i * seq:i * seq + seq + 1] for i in range(n)]
    return torch.from_numpy(np.stack(rows)).to(device)


def make_optimizer(params, lr, wd):
    decay = [p for p in params if p.requires_grad and p.dim() >= 2]
    nodecay = [p for p in params if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": wd}, {"params": nodecay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    except Exception:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def train_loop(name, module, params, loss_fn, batches, eval_fn, lr, seconds, max_steps, warmup=100, wd=0.1,
               eval_every=10.0, tokens_per_step=0):
    """AdamW, linear warm-up then cosine to 10% over whichever comes first: `seconds` or `max_steps`.

    Evaluates every `eval_every` seconds and keeps the best checkpoint (early stopping)."""
    opt = make_optimizer(params, lr, wd)
    module.train()
    t0 = time.time()
    step, last_eval, best, best_state, hist = 0, t0, float("inf"), None, []
    while True:
        frac = max((time.time() - t0) / seconds, step / max(1, max_steps))
        if frac >= 1.0:
            break
        cur = lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = cur
        x = batches()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 100 == 0:
            log(f"[{name}] step {step} t={time.time() - t0:.1f}s lr={cur:.2e} loss={loss.item():.4f}")
        if time.time() - last_eval >= eval_every:
            v = eval_fn()
            hist.append((round(time.time() - t0, 1), step, round(v, 4)))
            log(f"[{name}] eval step {step} t={time.time() - t0:.1f}s val={v:.4f}")
            if v < best:
                best = v
                best_state = {k: t.detach().clone() for k, t in module.state_dict().items()}
            module.train()
            last_eval = time.time()
    v = eval_fn()
    hist.append((round(time.time() - t0, 1), step, round(v, 4)))
    log(f"[{name}] final step {step} val={v:.4f} (best seen {best:.4f})")
    if best_state is not None and best < v:
        module.load_state_dict(best_state)
        v = best
        log(f"[{name}] restored best checkpoint val={v:.4f}")
    module.eval()
    secs = time.time() - t0
    return {"steps": step, "seconds": round(secs, 1), "best_val": round(v, 4), "eval_history": hist,
            "tokens_seen": step * tokens_per_step}


def soft_ce(student_logits, teacher_logits):
    p = torch.softmax(teacher_logits.float(), dim=-1)
    return -(p * torch.log_softmax(student_logits.float(), dim=-1)).sum(-1).mean()


@torch.no_grad()
def lm_val_loss(model, windows, bs=32):
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(windows), bs):
        w = windows[i:i + bs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=w[:, :-1], use_cache=False).logits
        tot += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum").item()
        n += w[:, 1:].numel()
    return tot / n


@torch.no_grad()
def lm_val_loss_f32(model, windows, bs=32):
    tot, n = 0.0, 0
    for i in range(0, len(windows), bs):
        w = windows[i:i + bs]
        logits = model(input_ids=w[:, :-1], use_cache=False).logits.float()
        tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum").item()
        n += w[:, 1:].numel()
    return tot / n


# ----------------------------------------------------------------------------- acceptance simulation

@torch.no_grad()
def greedy(model, ids, n):
    x = ids
    for _ in range(n):
        nxt = model(input_ids=x, use_cache=False).logits[:, -1].float().argmax(-1)
        x = torch.cat([x, nxt[:, None]], 1)
    return x[:, ids.shape[1]:]


@torch.no_grad()
def acceptance(target, draft_model, head, prompts, gen, max_k, device):
    """Greedy draft/verify simulation. Returns per-drafter {K: stats} and depth-wise agreement.

    At temperature 0 the verified sequence is the target's greedy continuation G whatever is
    drafted, so each round is: state j (prompt + G[:j], G[j-1] being the token the target just
    produced), drafter proposes K-1 greedy tokens, accepted = longest prefix equal to
    G[j:j+K-1], then j += accepted + 1 (the target's own token).
    """
    b, plen = prompts.shape
    extra = max_k
    G = greedy(target, prompts, gen + extra)
    full = torch.cat([prompts, G], 1)
    hid = target.model(input_ids=full, use_cache=False).last_hidden_state.float()
    embed, lm_head = target.get_input_embeddings(), target.lm_head
    nd = max_k - 1
    chains = {"draft": torch.zeros(b, gen + 1, nd, dtype=torch.long, device=device),
              "mtp": torch.zeros(b, gen + 1, nd, dtype=torch.long, device=device)}
    for j in range(1, gen + 1):
        ctx = full[:, :plen + j]
        if draft_model is not None:
            chains["draft"][:, j] = greedy(draft_model, ctx, nd)
        if head is not None:
            toks, _ = mtp_lib.draft(head, embed, lm_head, hid[:, :plen + j - 1], ctx, nd)
            chains["mtp"][:, j] = toks
    res = {}
    for name, ch in chains.items():
        if (name == "draft" and draft_model is None) or (name == "mtp" and head is None):
            continue
        ch = ch.cpu().numpy()
        g = G.cpu().numpy()
        per_k = {}
        for k in range(2, max_k + 1):
            acc = prop = rounds = 0
            for i in range(b):
                j = 1
                while j < gen:
                    d = ch[i, j, :k - 1]
                    t = g[i, j:j + k - 1]
                    a = 0
                    while a < k - 1 and d[a] == t[a]:
                        a += 1
                    acc += a
                    prop += k - 1
                    rounds += 1
                    j += a + 1
            per_k[str(k)] = {"acceptance_rate": round(acc / prop, 4), "mean_accepted": round(acc / rounds, 4),
                             "tokens_per_round": round((acc + rounds) / rounds, 4),
                             "accepted": acc, "proposed": prop, "rounds": rounds}
        # depth-wise agreement with the target's greedy token, over all states j
        depth = []
        for dpt in range(nd):
            m = [ch[i, j, dpt] == g[i, j + dpt] for i in range(b) for j in range(1, gen)]
            depth.append(round(float(np.mean(m)), 4))
        res[name] = {"per_k": per_k, "depth_agreement": depth}
    return res, G


# ----------------------------------------------------------------------------- references

@torch.no_grad()
def target_reference(path, prompt, cont_len, name):
    from safetensors.torch import save_file
    import transformers
    model = load_llama(path, "cpu", torch.float32, attn="eager")
    ids = list(prompt)
    for _ in range(cont_len):
        ids.append(int(model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].argmax()))
    logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()
    cont = ids[len(prompt):]
    top2 = torch.topk(logits, 2, dim=-1).values
    margins = top2[:, 0] - top2[:, 1]
    picks = logits.argmax(-1).tolist()
    consistent = all(picks[len(prompt) - 1 + i] == cont[i] for i in range(cont_len))
    save_file({"logits": logits.contiguous(), "tokens": torch.tensor(ids, dtype=torch.int32)},
              os.path.join(path, "reference.safetensors"))
    meta = {
        "name": name, "family": "llama", "storage_dtype": "bfloat16", "config_form": "classic",
        "sharded": False, "tied_embeddings": True, "rope": "default",
        "prompt": list(prompt), "continuation": cont,
        "max_abs_logit": float(logits.abs().max()),
        "min_top2_margin_all": float(margins.min()),
        "min_top2_margin_greedy": float(margins[len(prompt) - 1:len(prompt) - 1 + cont_len].min()),
        "full_forward_matches_greedy": consistent,
        "reload_max_abs_diff": 0.0,
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
    }
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    return model, ids, meta


@torch.no_grad()
def mtp_reference(target_cpu, mtp_path, ids, n_chain):
    """Golden values for the MTP head on the CPU in float32 (see docs/formats.md)."""
    from safetensors.torch import save_file
    head = mtp_lib.TandemMTPHead.load(mtp_path, torch.float32, "cpu")
    x = torch.tensor([ids])
    hid = target_cpu.model(input_ids=x, use_cache=False).last_hidden_state.float()
    embed, lm_head = target_cpu.get_input_embeddings(), target_cpu.lm_head
    o1 = head(hid[:, :-1], embed(x[:, 1:]))                 # entries at positions 1..n-1
    d1_logits = lm_head(o1)[0].float()                       # [n-1, V]; row t predicts x_{t+2}
    toks, chain_logits = mtp_lib.draft(head, embed, lm_head, hid[:, :-1], x, n_chain)
    assert torch.equal(toks[0, 0], d1_logits[-1].argmax()), "draft() and forward() disagree"
    save_file({"tokens": torch.tensor(ids, dtype=torch.int32),
               "depth1_logits_last8": d1_logits[-8:].contiguous(),
               "chain_logits": chain_logits[0].contiguous()},
              os.path.join(mtp_path, "reference.safetensors"))
    meta = {
        "about": "MTP head golden values, float32 on the CPU from the stored bf16 weights of this head "
                 "and of ../tandem-target. tokens = the target reference sequence (x_0..x_{n-1}). "
                 "depth1_argmax[t] = argmax of the depth-1 logits from (h_t, x_{t+1}) at position t+1 "
                 "(predicts x_{t+2}), t = 0..n-2; depth1_logits_last8 = the last 8 of those rows. "
                 "chain = greedy recursive drafts from the whole sequence (first from (h_{n-2}, x_{n-1})), "
                 "chain_logits their logits rows.",
        "tokens": list(ids),
        "depth1_argmax": d1_logits.argmax(-1).tolist(),
        "depth1_agrees_with_data": float(np.mean([int(a == b) for a, b in zip(d1_logits.argmax(-1).tolist()[:-1], ids[2:])])),
        "chain": toks[0].tolist(),
        "max_abs_logit": float(max(d1_logits.abs().max(), chain_logits.abs().max())),
        "torch_version": torch.__version__,
    }
    with open(os.path.join(mtp_path, "reference.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    return meta


# ----------------------------------------------------------------------------- main

def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny models, a slice of the data, seconds-long budgets")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--chat-samples", type=int, default=2500)
    ap.add_argument("--target-seconds", type=float, default=150)
    ap.add_argument("--draft-seconds", type=float, default=90)
    ap.add_argument("--mtp-seconds", type=float, default=80)
    ap.add_argument("--target-epochs", type=float, default=20)
    ap.add_argument("--draft-epochs", type=float, default=20)
    ap.add_argument("--mtp-epochs", type=float, default=15)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--mtp-lr", type=float, default=2e-3)
    ap.add_argument("--dropout", type=float, default=0.1, help="target residual dropout")
    ap.add_argument("--draft-hard-weight", type=float, default=0.0, help="weight of data CE in the draft loss")
    ap.add_argument("--mtp-depth2-weight", type=float, default=0.5)
    ap.add_argument("--eval-prompts", type=int, default=20)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--max-k", type=int, default=6)
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "train.log"), "a")
    t_start = time.time()
    import tokenizers
    import transformers
    log(f"torch {torch.__version__} transformers {transformers.__version__} tokenizers {tokenizers.__version__} "
        f"cuda {torch.cuda.is_available()} {torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
    log("args", vars(args))
    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    rng = random.Random(args.seed)

    if args.smoke:
        arch_t = dict(hidden=64, layers=2, heads=4, kv_heads=2, inter=128)
        arch_d = dict(hidden=32, layers=2, heads=2, kv_heads=1, inter=64)
        mtp_inter = 128
        vocab, seq, batch = 512, 64, 8
        limit = 400_000
        args.gen, args.eval_prompts, args.chat_samples = 16, 4, 50
        args.target_seconds = args.draft_seconds = args.mtp_seconds = 4
    else:
        arch_t = dict(hidden=384, layers=8, heads=6, kv_heads=2, inter=1024)
        arch_d = dict(hidden=192, layers=3, heads=3, kv_heads=1, inter=512)
        mtp_inter = 1024
        vocab, seq, batch = args.vocab, args.seq, args.batch
        limit = 0
    max_pos = 2048
    metrics = {"args": vars(args), "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                                "tokenizers": tokenizers.__version__},
               "device": torch.cuda.get_device_name(0)}

    # ---- data and tokenizer
    t0 = time.time()
    train_docs = read_docs(os.path.join(args.data, "train.txt"), limit)
    val_docs = read_docs(os.path.join(args.data, "val.txt"), limit // 10 if limit else 0)
    tok = train_tokenizer(train_docs, vocab)
    tok_dir = os.path.join(args.out, "tokenizer")
    save_tokenizer(tok, tok_dir, max_pos)
    chats = chat_samples(train_docs, args.chat_samples, rng)
    train_stream = encode_stream(tok, train_docs + chats)
    chat_tokens = len(encode_stream(tok, chats))
    val_stream = encode_stream(tok, val_docs)
    vocab = tok.get_vocab_size()
    sample = val_docs[0][:300]
    rt = tok.decode(tok.encode(sample).ids)
    metrics["tokenizer"] = {"vocab_size": vocab, "train_tokens": int(len(train_stream)), "chat_tokens": chat_tokens,
                            "val_tokens": int(len(val_stream)), "val_bytes_per_token":
                                round(sum(len(d.encode()) for d in val_docs) / len(val_stream), 3),
                            "roundtrip_ok": rt == sample, "seconds": round(time.time() - t0, 1)}
    log("tokenizer", metrics["tokenizer"])
    assert rt == sample, (rt, sample)
    try:
        hf_tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
        msgs = [{"role": "user", "content": "Call me Ishmael."}]
        chat = hf_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        want = "<|im_start|>user\nCall me Ishmael.<|im_end|>\n<|im_start|>assistant\n"
        ids = hf_tok(chat, add_special_tokens=True)["input_ids"]
        metrics["tokenizer"]["hf_chat_template_ok"] = chat == want
        metrics["tokenizer"]["hf_chat_ids"] = ids
        metrics["tokenizer"]["hf_eos_pad"] = [hf_tok.eos_token_id, hf_tok.pad_token_id]
        log("hf tokenizer chat:", repr(chat), ids, "eos/pad", hf_tok.eos_token_id, hf_tok.pad_token_id)
    except Exception as e:  # recorded; the tokenizer.json itself is what tandem reads
        metrics["tokenizer"]["hf_load_error"] = repr(e)
        log("WARNING: AutoTokenizer check failed:", repr(e))

    batches = Batches(train_stream, seq, batch, device, args.seed)
    steps_per_epoch = len(train_stream) / (seq * batch)
    vwin = val_windows(val_stream, seq, device, 10_000)
    log(f"val windows {tuple(vwin.shape)}")
    models_dir = os.path.join(args.out, "models")
    paths = {k: os.path.join(models_dir, f"tandem-{k}") for k in ("target", "draft", "mtp")}

    def save_metrics():
        metrics["total_seconds"] = round(time.time() - t_start, 1)
        with open(os.path.join(args.out, "metrics.json"), "w") as f:
            json.dump(metrics, f, indent=2)

    # ---- target
    cfg_t = llama_config(vocab, arch_t["hidden"], arch_t["layers"], arch_t["heads"], arch_t["kv_heads"],
                         arch_t["inter"], max_pos)
    target = new_llama(cfg_t, args.seed).to(device)
    hooks = add_resid_dropout(target, args.dropout)
    log(f"target params {n_params(target):,}")

    def target_loss(x):
        logits = target(input_ids=x[:, :-1], use_cache=False).logits
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    ev = max(2.0, args.target_seconds / 15)
    metrics["target_train"] = train_loop("target", target, list(target.parameters()), target_loss, batches,
                                         lambda: lm_val_loss(target, vwin), args.target_lr, args.target_seconds,
                                         int(args.target_epochs * steps_per_epoch),
                                         eval_every=ev, tokens_per_step=seq * batch)
    metrics["target_train"]["epochs"] = round(metrics["target_train"]["tokens_seen"] / len(train_stream), 2)
    for h in hooks:
        h.remove()
    export_llama(target, paths["target"], tok_dir)
    metrics["target"] = {"params": n_params(target), "bytes": dir_bytes(paths["target"]), "arch": arch_t}
    log("exported target", metrics["target"])
    save_metrics()
    del target
    torch.cuda.empty_cache()

    # The exported (bf16) target is what the draft and the MTP head learn from.
    target = load_llama(paths["target"], device, torch.float32)
    for p in target.parameters():
        p.requires_grad_(False)

    # ---- draft, distilled from the target's logits
    cfg_d = llama_config(vocab, arch_d["hidden"], arch_d["layers"], arch_d["heads"], arch_d["kv_heads"],
                         arch_d["inter"], max_pos)
    draft = new_llama(cfg_d, args.seed + 1).to(device)
    log(f"draft params {n_params(draft):,}")

    def draft_loss(x):
        inp = x[:, :-1]
        with torch.no_grad():
            tl = target(input_ids=inp, use_cache=False).logits
        dl = draft(input_ids=inp, use_cache=False).logits
        loss = soft_ce(dl, tl)
        if args.draft_hard_weight > 0:
            hard = F.cross_entropy(dl.float().reshape(-1, dl.shape[-1]), x[:, 1:].reshape(-1))
            loss = (1 - args.draft_hard_weight) * loss + args.draft_hard_weight * hard
        return loss

    ev = max(2.0, args.draft_seconds / 10)
    metrics["draft_train"] = train_loop("draft", draft, list(draft.parameters()), draft_loss, batches,
                                        lambda: lm_val_loss(draft, vwin), args.draft_lr, args.draft_seconds,
                                        int(args.draft_epochs * steps_per_epoch),
                                        eval_every=ev, tokens_per_step=seq * batch)
    metrics["draft_train"]["epochs"] = round(metrics["draft_train"]["tokens_seen"] / len(train_stream), 2)
    export_llama(draft, paths["draft"], tok_dir)
    metrics["draft"] = {"params": n_params(draft), "bytes": dir_bytes(paths["draft"]), "arch": arch_d,
                        "loss": "soft cross-entropy to the target's distribution"
                                + (f" + {args.draft_hard_weight} data CE" if args.draft_hard_weight else "")}
    log("exported draft", metrics["draft"])
    save_metrics()
    del draft
    torch.cuda.empty_cache()

    # ---- MTP head on the frozen target
    mcfg = mtp_lib.make_config(target.config, intermediate_size=mtp_inter)
    head = mtp_lib.TandemMTPHead(mcfg)
    head.init_weights(seed=args.seed + 2)
    head = head.to(device)
    log(f"mtp params {head.num_parameters():,}")
    embed, lm_head = target.get_input_embeddings(), target.lm_head

    def mtp_loss(x, depth2=True):
        inp = x[:, :-1]
        with torch.no_grad():
            hid = target.model(input_ids=inp, use_cache=False).last_hidden_state
            tl = lm_head(hid)
        o1, o2 = mtp_lib.train_outputs(head, hid, inp, embed, depth2=depth2)
        loss = soft_ce(lm_head(o1), tl[:, 1:])
        if o2 is not None:
            loss = loss + args.mtp_depth2_weight * soft_ce(lm_head(o2), tl[:, 2:])
        return loss

    mv = vwin[:64]

    @torch.no_grad()
    def mtp_val():
        head.eval()
        tot = 0.0
        for i in range(0, len(mv), 16):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                tot += mtp_loss(mv[i:i + 16], depth2=False).item() * len(mv[i:i + 16])
        return tot / len(mv)

    ev = max(2.0, args.mtp_seconds / 10)
    metrics["mtp_train"] = train_loop("mtp", head, list(head.parameters()), mtp_loss, batches, mtp_val,
                                      args.mtp_lr, args.mtp_seconds,
                                      int(args.mtp_epochs * steps_per_epoch), eval_every=ev, tokens_per_step=seq * batch)
    metrics["mtp_train"]["epochs"] = round(metrics["mtp_train"]["tokens_seen"] / len(train_stream), 2)
    head.save(paths["mtp"])
    metrics["mtp"] = {"params": head.num_parameters(), "bytes": dir_bytes(paths["mtp"]), "config": mcfg,
                      "loss": f"soft CE to target at depth 1 + {args.mtp_depth2_weight} x depth 2 (recursive)"}
    log("exported mtp", metrics["mtp"])
    save_metrics()
    del head
    torch.cuda.empty_cache()

    # ---- evaluation on the exported checkpoints (float32 from the stored bf16 weights)
    t0 = time.time()
    target = load_llama(paths["target"], device, torch.float32)
    draft = load_llama(paths["draft"], device, torch.float32)
    head = mtp_lib.TandemMTPHead.load(paths["mtp"], torch.float32, device)
    tl_, dl_ = lm_val_loss_f32(target, vwin), lm_val_loss_f32(draft, vwin)
    metrics["val"] = {"target_loss": round(tl_, 4), "target_ppl": round(math.exp(tl_), 2),
                      "draft_loss": round(dl_, 4), "draft_ppl": round(math.exp(dl_), 2),
                      "tokens": int(vwin[:, 1:].numel())}
    with torch.no_grad():
        # MTP: data CE for x_{t+2} and agreement with the target's own argmax at t+1
        tot = agree = n = 0
        for i in range(0, len(vwin), 16):
            w = vwin[i:i + 16, :-1]
            hid = target.model(input_ids=w, use_cache=False).last_hidden_state
            tlog = target.lm_head(hid).float()
            o1, _ = mtp_lib.train_outputs(head, hid, w, target.get_input_embeddings(), depth2=False)
            ml = target.lm_head(o1).float()[:, :-1]
            tot += F.cross_entropy(ml.reshape(-1, ml.shape[-1]), w[:, 2:].reshape(-1), reduction="sum").item()
            agree += (ml.argmax(-1) == tlog[:, 1:-1].argmax(-1)).sum().item()
            n += ml.shape[0] * ml.shape[1]
        metrics["val"]["mtp_depth1_loss_vs_data"] = round(tot / n, 4)
        metrics["val"]["mtp_depth1_top1_agreement_with_target"] = round(agree / n, 4)
        # draft top-1 agreement with the target on teacher-forced val text
        agree = n = 0
        for i in range(0, len(vwin), 16):
            w = vwin[i:i + 16, :-1]
            a = target(input_ids=w, use_cache=False).logits.argmax(-1)
            b = draft(input_ids=w, use_cache=False).logits.argmax(-1)
            agree += (a == b).sum().item()
            n += a.numel()
        metrics["val"]["draft_top1_agreement_with_target"] = round(agree / n, 4)
    log("val", metrics["val"])
    save_metrics()

    # prompts: evenly spaced windows of the validation stream that hold no document break
    starts, pos = [], 0
    step = max(1, (len(val_stream) - args.prompt_len) // args.eval_prompts)
    while len(starts) < args.eval_prompts and pos + args.prompt_len < len(val_stream):
        w = val_stream[pos:pos + args.prompt_len]
        if (w == EOT).any():
            pos += args.prompt_len
            continue
        starts.append(pos)
        pos += step
    prompts = torch.from_numpy(np.stack([val_stream[s:s + args.prompt_len] for s in starts])).to(device)
    acc, G = acceptance(target, draft, head, prompts, args.gen, args.max_k, device)
    metrics["acceptance"] = {"setup": f"greedy, {len(starts)} held-out prompts x {args.gen} generated tokens, "
                                      f"prompt {args.prompt_len} tokens, float32 on {metrics['device']} (PyTorch)",
                             "results": acc,
                             "sample_prompt": tok.decode(prompts[0].tolist()),
                             "sample_continuation": tok.decode(G[0, :args.gen].tolist()),
                             "seconds": round(time.time() - t0, 1)}
    for name, r in acc.items():
        log(name, json.dumps(r["per_k"]), "depth", r["depth_agreement"])
    log("sample:", repr(metrics["acceptance"]["sample_prompt"]), "->",
        repr(metrics["acceptance"]["sample_continuation"]))
    save_metrics()
    del target, draft, head
    torch.cuda.empty_cache()

    # ---- golden references (CPU, float32, eager) in the fixtures' format
    prompt = None
    for d in val_docs:
        ids = tok.encode(d).ids
        if len(ids) >= 40:
            prompt = ids[:40]
            break
    tcpu, ids, meta = target_reference(paths["target"], prompt, 32, "tandem-target")
    metrics["reference"] = {"prompt_text": tok.decode(prompt), "continuation_text": tok.decode(meta["continuation"]),
                            "min_top2_margin_greedy": meta["min_top2_margin_greedy"],
                            "full_forward_matches_greedy": meta["full_forward_matches_greedy"]}
    mmeta = mtp_reference(tcpu, paths["mtp"], ids, 5)
    metrics["reference"]["mtp_chain"] = mmeta["chain"]
    log("reference", metrics["reference"])
    for k, p in paths.items():
        metrics[k]["bytes_with_reference"] = dir_bytes(p)
    metrics["models_total_bytes"] = sum(dir_bytes(p) for p in paths.values())
    save_metrics()
    log(f"done in {time.time() - t_start:.1f}s; models total {metrics['models_total_bytes']:,} bytes")


if __name__ == "__main__":
    main()
