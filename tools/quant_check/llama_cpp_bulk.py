#!/usr/bin/env python3
"""Bulk check of kernels::quantize against llama.cpp (not part of CI).

Writes OUT (default /tmp/llama_cpp_bulk.bin, ~40 MB): five sets of 2^20 f32
values (N(0, 0.02), Student-t 3, uniform(-1, 1), bf16-rounded N(0, 0.02),
finite extremes: magnitudes 1e-8 .. 1e7, subnormals, ±3e38),
each followed by llama.cpp's bytes for q4_k, q8_0, q4_0, q5_0, q6_k from
ggml_quantize_chunk (what llama_model_quantize calls per tensor; no imatrix),
and prints each type's relative RMS error on the first set.
tandem-quant-check (compare_bulk.cpp) then quantizes the same values with
tandem and counts differing bytes.

    /tmp/llvenv/bin/python tools/quant_check/llama_cpp_bulk.py [OUT]
    cmake --build build --target tandem-quant-check && build/tools/quant_check/tandem-quant-check [OUT]
"""
import ctypes
import os
import sys

import numpy as np
import llama_cpp
from gguf import quants, GGMLQuantizationType as T

lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
lib.ggml_quantize_chunk.restype = ctypes.c_size_t
lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
rng = np.random.default_rng(7)
n = 1 << 20
x = (rng.standard_normal(n) * 0.02).astype(np.float32)
u = x.view(np.uint32)
sets = {
    "normal": rng.standard_normal(n).astype(np.float32) * np.float32(0.02),
    "t3": (rng.standard_t(3, n) * 0.02).astype(np.float32),
    "uniform": rng.uniform(-1, 1, n).astype(np.float32),
    "bf16normal": ((u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000).view(np.float32),
    "extremes": None,
}
# Finite extremes: each 256-value chunk scaled by 10^(c % 16 - 8), and in odd
# chunks every 7th value replaced by zeros, subnormals, ±3e38, 65504, 1e5, 1e-8.
e = rng.standard_normal(n).astype(np.float32).reshape(-1, 256)
e *= (10.0 ** (np.arange(e.shape[0]) % 16 - 8)).astype(np.float32)[:, None]
specials = np.array([0.0, -0.0, 1e-45, -1e-40, 3e38, -3e38, 65504.0, 1e5, 1e-8], np.float32)
odd = e[1::2].reshape(-1)
odd[::7] = specials[np.arange(odd[::7].size) % specials.size]
e[1::2] = odd.reshape(-1, 256)
sets["extremes"] = e.reshape(-1)
types = {"q4_k": T.Q4_K, "q8_0": T.Q8_0, "q4_0": T.Q4_0, "q5_0": T.Q5_0, "q6_k": T.Q6_K}
out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/llama_cpp_bulk.bin"
with open(out_path, "wb") as f:
    for sname, v in sets.items():
        v.astype("<f4").tofile(f)
        for tname, t in types.items():
            bs, ts = quants.GGML_QUANT_SIZES[t]
            out = np.zeros(n // bs * ts, np.uint8)
            lib.ggml_quantize_chunk(int(t), v.ctypes.data, out.ctypes.data, 0, n // 4096, 4096, None)
            out.tofile(f)
            if sname == "normal":
                back = quants.dequantize(out, t).reshape(-1)
                rms = np.sqrt(np.mean((back - v) ** 2)) / np.sqrt(np.mean(v ** 2))
                print(f"{tname} relative RMS {rms:.4f}")
print(f"{out_path} (llama-cpp-python {llama_cpp.__version__})")
