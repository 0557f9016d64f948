#!/usr/bin/env python3
"""Writes a tiny but complete GGUF (a one-layer llama of hidden size 8 with a byte-level
tokenizer, a chat template and a key of every value type) with the `gguf` package's writer: the seed of fuzz_gguf
(scripts/fuzz.sh), small enough that the fuzzer runs thousands of inputs a second.

    make_gguf_seed.py OUT.gguf [ARCH]     (llama, qwen2, qwen3, qwen2moe, qwen3moe)
"""
import sys

import numpy as np

import gguf

out, arch = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "llama")
w = gguf.GGUFWriter(out, arch)
hidden, heads, kv_heads, ffn, vocab = 8, 2, 1, 16, 8
w.add_context_length(64)
w.add_embedding_length(hidden)
w.add_block_count(1)
w.add_feed_forward_length(ffn)
w.add_head_count(heads)
w.add_head_count_kv(kv_heads)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
experts = 2
if arch.endswith("moe"):  # one sparse layer, its experts stacked as llama.cpp stacks them
    w.add_expert_count(experts)
    w.add_expert_used_count(1)
    w.add_expert_feed_forward_length(ffn)
if arch == "qwen2moe":  # and a shared expert
    w.add_expert_shared_feed_forward_length(ffn)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen2" if arch.startswith("qwen") else "llama-bpe")
w.add_token_list(["a", "b", "ab", "Ġ", "Ġa", "<s>", "</s>", "<|im_end|>"])
w.add_token_types([1, 1, 1, 1, 1, 3, 3, 3])
w.add_token_merges(["a b", "Ġ a"])
w.add_bos_token_id(5)
w.add_eos_token_id(6)
w.add_add_bos_token(True)
w.add_chat_template("{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}")
# One key of every other value type (the reader's tests compare them with gguf's reader).
w.add_uint8("tandem.test.u8", 200)
w.add_int8("tandem.test.i8", -100)
w.add_uint16("tandem.test.u16", 60000)
w.add_int16("tandem.test.i16", -30000)
w.add_int32("tandem.test.i32", -2000000000)
w.add_uint64("tandem.test.u64", 2**63 + 5)
w.add_int64("tandem.test.i64", -(2**62))
w.add_float64("tandem.test.f64", 0.1)
w.add_array("tandem.test.nested", [[1, 2], [3]])
w.add_array("tandem.test.floats", [0.5, -1.25, 3.0])
rng = np.random.default_rng(0)
head_dim = hidden // heads


def add(name, *shape, f32=False):
    dtype = np.float16 if len(shape) == 2 and not f32 else np.float32
    w.add_tensor(name, rng.standard_normal(shape).astype(dtype))


add("token_embd.weight", vocab, hidden)
add("output_norm.weight", hidden)
add("blk.0.attn_norm.weight", hidden)
add("blk.0.attn_q.weight", heads * head_dim, hidden)
add("blk.0.attn_k.weight", kv_heads * head_dim, hidden)
add("blk.0.attn_v.weight", kv_heads * head_dim, hidden)
add("blk.0.attn_output.weight", hidden, heads * head_dim)
if arch in ("qwen2", "qwen2moe"):
    for p, n in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
        add(f"blk.0.attn_{p}.bias", n * head_dim)
if arch.startswith("qwen3"):
    add("blk.0.attn_q_norm.weight", head_dim)
    add("blk.0.attn_k_norm.weight", head_dim)
add("blk.0.ffn_norm.weight", hidden)
if arch.endswith("moe"):
    add("blk.0.ffn_gate_inp.weight", experts, hidden, f32=True)  # F32, as llama.cpp writes routers
    add("blk.0.ffn_gate_exps.weight", experts, ffn, hidden)
    add("blk.0.ffn_up_exps.weight", experts, ffn, hidden)
    add("blk.0.ffn_down_exps.weight", experts, hidden, ffn)
if arch == "qwen2moe":  # the shared expert and its 1-D F32 gate (ffn_gate_inp_shexp [hidden])
    add("blk.0.ffn_gate_shexp.weight", ffn, hidden)
    add("blk.0.ffn_up_shexp.weight", ffn, hidden)
    add("blk.0.ffn_down_shexp.weight", hidden, ffn)
    add("blk.0.ffn_gate_inp_shexp.weight", hidden)
else:
    add("blk.0.ffn_gate.weight", ffn, hidden)
    add("blk.0.ffn_up.weight", ffn, hidden)
    add("blk.0.ffn_down.weight", hidden, ffn)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
