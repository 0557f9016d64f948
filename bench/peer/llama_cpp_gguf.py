#!/usr/bin/env python3
"""llama.cpp as the peer for `tandem bench --weights` (docs/benchmarks.md).

make: writes a GGUF (v3, arch qwen2) of a tandem-random-model directory's
bf16 weights — the same numbers tandem loads — with a placeholder
SentencePiece vocabulary (the benchmark feeds token ids), then quantizes it
with llama.cpp's own quantizer (llama_model_quantize) to q8_0, q4_0 and
q4_k_m.
run: B=1 prefill and decode tokens/s of one GGUF through llama-cpp-python's
llama_cpp API (best of --reps), the same prompt length and decode count as
`tandem bench -p P -n N -r R`.

    # without AMX, so that llama.cpp's weight repacking works on a VM that
    # reports AMX in cpuid without granting its tile state (docs/benchmarks.md)
    CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' \
      -DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' -DLLAMA_CURL=OFF" \
      pip install llama-cpp-python==0.3.36 gguf==0.19.0 numpy
    python3 bench/peer/llama_cpp_gguf.py make --model DIR --out OUTDIR
    python3 bench/peer/llama_cpp_gguf.py run --gguf OUTDIR/q8_0.gguf -t 1 -p 64 -n 32 -r 3
"""
import argparse
import json
import struct
import time

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        assert t["dtype"] == "BF16", (name, t["dtype"])
        yield name, t["shape"], np.asarray(data[b:e]).view(np.uint16).reshape(t["shape"])


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    i = parts[2]
    rest = ".".join(parts[3:])
    table = {
        "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    }
    return f"blk.{i}.{table[rest]}"


def permute_rows(w, heads):
    """The q/k row order llama.cpp's converter writes for the llama architecture."""
    return np.ascontiguousarray(w.reshape(heads, 2, w.shape[0] // heads // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape))


def make(args):
    import gguf

    cfg = json.load(open(args.model + "/config.json"))
    bf16 = args.out + "/bf16.gguf"
    # qwen2 for the Qwen presets; llama (q/k rows permuted as llama.cpp's
    # converter stores them, which tandem undoes at load) for llama-3.2-1b.
    # The llama3 RoPE scaling is not written (no rope_freqs): speed only.
    arch = "llama" if cfg["model_type"] == "llama" else "qwen2"
    w = gguf.GGUFWriter(bf16, arch)
    w.add_context_length(cfg.get("max_position_embeddings", 32768))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg.get("rope_theta", 1e6))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    if arch == "llama":
        w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    vocab = cfg["vocab_size"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(vocab - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (vocab - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, shape, raw in read_safetensors(args.model + "/model.safetensors"):
        if name.endswith("norm.weight") or name.endswith(".bias"):
            f32 = (raw.astype(np.uint32) << 16).view(np.float32)
            w.add_tensor(gguf_name(name), f32)
        else:
            if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
                heads = cfg["num_attention_heads"] if ".q_proj." in name else cfg["num_key_value_heads"]
                raw = permute_rows(raw, heads)
            w.add_tensor(gguf_name(name), raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    import llama_cpp  # only the quantization needs llama.cpp

    for tag, ftype in [("q8_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0), ("q4_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0),
                       ("q4_k_m", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M)]:
        if tag not in args.types.split(","):
            continue
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = 2
        out = f"{args.out}/{tag}.gguf"
        rc = llama_cpp.llama_model_quantize(bf16.encode(), out.encode(), params)
        print(f"{out}: rc {rc}")


def run(args):
    import llama_cpp

    if args.no_extra_bufts:
        # The AMX / repack weight buffers (ggml "extra buffer types") off: on a
        # VM that reports AMX in cpuid without enabling its tile state they
        # crash (SIGILL); the plain CPU path is what remains.
        default = llama_cpp.llama_model_default_params

        def params():
            p = default()
            p.use_extra_bufts = False
            return p

        llama_cpp.llama_model_default_params = params
        llama_cpp.llama_cpp.llama_model_default_params = params
    llm = llama_cpp.Llama(model_path=args.gguf, n_threads=args.threads, n_threads_batch=args.threads,
                          n_ctx=args.prompt + args.decode + 16, n_batch=max(args.prompt, 32), verbose=False)
    prompt = [300 + (i * 37) % 5000 for i in range(args.prompt)]
    best_p = best_d = 0.0
    for _ in range(args.reps):
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t = time.perf_counter()
        llm.eval(prompt)
        best_p = max(best_p, args.prompt / (time.perf_counter() - t))
        tok = 500
        t = time.perf_counter()
        for _ in range(args.decode):
            llm.eval([tok])
            tok = 300 + (tok * 7) % 5000
        best_d = max(best_d, args.decode / (time.perf_counter() - t))
    print(f"llama.cpp {llama_cpp.__version__} {args.gguf} threads {args.threads}: "
          f"prefill {best_p:.1f} tok/s ({args.prompt} tokens), decode {best_d:.2f} tok/s (best of {args.reps})")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--model", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--types", default="q8_0,q4_0,q4_k_m", help="comma-separated: q8_0, q4_0, q4_k_m")
    r = sub.add_parser("run")
    r.add_argument("--gguf", required=True)
    r.add_argument("-t", "--threads", type=int, default=1)
    r.add_argument("-p", "--prompt", type=int, default=64)
    r.add_argument("-n", "--decode", type=int, default=32)
    r.add_argument("-r", "--reps", type=int, default=3)
    r.add_argument("--no-extra-bufts", action="store_true")
    args = ap.parse_args()
    make(args) if args.cmd == "make" else run(args)


if __name__ == "__main__":
    main()
