#!/usr/bin/env python3
"""Checks the bundled models against their references with an independent implementation.

Needs only torch and numpy (no transformers, no safetensors package): the safetensors files
are parsed by hand and the Llama target is rebuilt from mtp.py's decoder block, so this also
shows that the MTP head's block is exactly a Llama decoder layer.

  1. target: float32 logits of reference.safetensors (computed by transformers) vs ours
  2. MTP head: depth-1 logits and the recursive draft chain vs models/tandem-mtp/reference.*
  3. optional --chat "text": greedy reply of the target to a one-message ChatML prompt
     (ids from `tandem tokenize`, or the tokenizer-free byte-level decode below for output)

Usage: python3 tools/train/check_models.py [--models models] [--chat-ids "1 450 ..."]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mtp as mtp_lib  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype=np.float32)
        elif info["dtype"] == "I32":
            arr = np.frombuffer(raw, dtype=np.int32)
        else:
            raise ValueError(info["dtype"])
        out[name] = torch.from_numpy(arr.copy().reshape(info["shape"]))
    return out


class Llama(nn.Module):
    def __init__(self, path):
        super().__init__()
        with open(os.path.join(path, "config.json")) as f:
            c = json.load(f)
        cfg = dict(hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
                   num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
                   head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                   rms_norm_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"])
        self.embed = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([mtp_lib.DecoderLayer(cfg) for _ in range(c["num_hidden_layers"])])
        self.norm = mtp_lib.RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        w = read_safetensors(os.path.join(path, "model.safetensors"))
        state = {"embed.weight": w.pop("model.embed_tokens.weight"), "norm.weight": w.pop("model.norm.weight")}
        for k, v in w.items():
            if k.startswith("model.layers."):
                state["layers." + k[len("model.layers."):]] = v
        self.load_state_dict(state, strict=True)
        self.eval()

    def hidden(self, ids):
        x = self.embed(ids)
        pos = torch.arange(ids.shape[1])
        for layer in self.layers:
            x = layer(x, pos)
        return self.norm(x)

    def lm_head(self, h):
        return h @ self.embed.weight.T


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
    ap.add_argument("--chat-ids", default="", help="prompt ids (e.g. from `tandem tokenize --chat`) to continue greedily")
    ap.add_argument("--max-new", type=int, default=80)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    tdir, mdir = os.path.join(args.models, "tandem-target"), os.path.join(args.models, "tandem-mtp")
    target = Llama(tdir)
    ref = read_safetensors(os.path.join(tdir, "reference.safetensors"))
    ids = ref["tokens"].long()[None]
    h = target.hidden(ids)
    logits = target.lm_head(h)[0]
    diff = (logits - ref["logits"]).abs().max().item()
    same = bool((logits.argmax(-1) == ref["logits"].argmax(-1)).all())
    print(f"target: max|logit diff| vs transformers = {diff:.3e}, argmax identical: {same}")
    ok = diff < 1e-3 and same

    head = mtp_lib.TandemMTPHead(json.load(open(os.path.join(mdir, "config.json"))))
    head.load_state_dict(read_safetensors(os.path.join(mdir, "model.safetensors")), strict=True)
    head.eval()
    mref = read_safetensors(os.path.join(mdir, "reference.safetensors"))
    mjson = json.load(open(os.path.join(mdir, "reference.json")))
    o1 = head(h[:, :-1], target.embed(ids[:, 1:]))
    d1 = target.lm_head(o1)[0]
    d_diff = (d1[-8:] - mref["depth1_logits_last8"]).abs().max().item()
    d_same = d1.argmax(-1).tolist() == mjson["depth1_argmax"]
    toks, chain_logits = mtp_lib.draft(head, target.embed, target.lm_head, h[:, :-1], ids, len(mjson["chain"]))
    c_diff = (chain_logits[0] - mref["chain_logits"]).abs().max().item()
    c_same = toks[0].tolist() == mjson["chain"]
    print(f"mtp: depth-1 max|diff| {d_diff:.3e} argmax identical {d_same}; chain max|diff| {c_diff:.3e} "
          f"tokens identical {c_same} {toks[0].tolist()}")
    ok = ok and d_diff < 1e-3 and d_same and c_diff < 1e-3 and c_same

    if args.chat_ids:
        with open(os.path.join(tdir, "tokenizer.json")) as f:
            vocab = json.load(f)["model"]["vocab"]
        inv = {i: t for t, i in vocab.items()}
        inv.update({0: "<|endoftext|>", 1: "<|im_start|>", 2: "<|im_end|>"})
        bd = byte_decoder()
        x = torch.tensor([[int(t) for t in args.chat_ids.split()]])
        out = []
        for _ in range(args.max_new):
            nxt = int(target.lm_head(target.hidden(x)[:, -1]).argmax(-1))
            out.append(nxt)
            x = torch.cat([x, torch.tensor([[nxt]])], 1)
            if nxt in (0, 2):
                break
        text = b"".join(inv[t].encode() if t < 3 else bytes(bd[c] for c in inv[t]) for t in out)
        print("reply ids:", out)
        print("reply:", text.decode("utf-8", errors="replace"))
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
