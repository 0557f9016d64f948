// quant/pack.cpp — GGUF block rows -> the group/tile layout of layout.h.
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "load_split.h"
#include "quant/formats.h"
#include "quant/layout.h"

namespace tandem::kernels::quant {
namespace {

// Writes output o's codes of one 32-element slice (`q`, as decoded) into a tile.
void write_tile(DType dtype, const int32_t* q, int64_t o, uint8_t* tile) {
  for (int e = 0; e < 32; ++e) {
    const int j = e / 4, t = e % 4;
    const int64_t byte = o * 4 + t;
    if (dtype == DType::q8_0) {
      tile[j * kQuadBytes + byte] = static_cast<uint8_t>(q[e] ^ 0x80);
      continue;
    }
    const int low = q[e] & 15;
    tile[(j % 4) * kQuadBytes + byte] |= static_cast<uint8_t>(j < 4 ? low : low << 4);
    if ((dtype == DType::q5_k || dtype == DType::q5_0) && (q[e] & 16)) {
      uint64_t bits;
      std::memcpy(&bits, tile + 256 + j * 8, 8);
      bits |= uint64_t{1} << byte;
      std::memcpy(tile + 256 + j * 8, &bits, 8);
    } else if (dtype == DType::q6_k) {
      tile[256 + (j / 4) * kQuadBytes + byte] |= static_cast<uint8_t>(((q[e] >> 4) & 3) << (2 * (j % 4)));
    }
  }
}

void write_header(DType dtype, const DecodedBlock& b, int64_t o, uint8_t* h) {
  std::memcpy(h + 2 * o, &b.d, 2);
  if (dtype == DType::q4_k || dtype == DType::q5_k) {
    std::memcpy(h + 32 + 2 * o, &b.dmin, 2);
    for (int j = 0; j < 8; ++j) {
      h[64 + j * kGroup + o] = b.sc[j];
      h[192 + j * kGroup + o] = b.m[j];
    }
  } else if (dtype == DType::q6_k) {
    for (int j = 0; j < 16; ++j) h[32 + j * kGroup + o] = static_cast<uint8_t>(b.sc16[j]);
  }
}

}  // namespace

// Fills `dst` (zeroed, group_count(n) * layout.group_bytes(k) bytes). A
// group (kGroup outputs) is written by one thread: a large matrix is split by
// groups over a few threads (split_for_load), the same bytes.
void pack_quantized(const uint8_t* src, DType dtype, int64_t n, int64_t k, uint8_t* dst) {
  const Layout L = layout_of(dtype);
  TANDEM_CHECK(L.sb_elems == dtype_block_elems(dtype) && k % L.sb_elems == 0);
  const size_t row_bytes = dtype_row_bytes(dtype, k);
  const size_t bb = dtype_block_bytes(dtype);
  const int64_t sbs = k / L.sb_elems;
  auto pack_groups = [&](int64_t g_begin, int64_t g_end) {
    DecodedBlock b;
    for (int64_t col = g_begin * kGroup; col < std::min(n, g_end * kGroup); ++col) {
      const int64_t g = col / kGroup, o = col % kGroup;
      uint8_t* group = dst + g * L.group_bytes(k);
      for (int64_t s = 0; s < sbs; ++s) {
        b = DecodedBlock{};
        decode_block(dtype, src + col * row_bytes + s * bb, &b);
        uint8_t* sb = group + s * L.sb_bytes();
        write_header(dtype, b, o, sb);
        for (int64_t t = 0; t < L.sb_elems / 32; ++t)
          write_tile(dtype, b.q + 32 * t, o, sb + L.header_bytes + t * L.tile_bytes);
      }
    }
  };
  split_for_load(group_count(n), static_cast<size_t>(n) * row_bytes, pack_groups);
}

}  // namespace tandem::kernels::quant
