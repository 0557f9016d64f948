#include "model/weights_quant.h"

#include <algorithm>
#include <cctype>

#include "core/thread_pool.h"

namespace tandem::model {

Expected<WeightsQuant> parse_weights_quant(const std::string& text) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += static_cast<char>(std::tolower(c));
  }
  if (t == "stored") return WeightsQuant::stored;
  if (t == "q8_0") return WeightsQuant::q8_0;
  if (t == "q4_0") return WeightsQuant::q4_0;
  if (t == "q4_k") return WeightsQuant::q4_k;
  return invalid_argument("weights '" + text + "' is not one of: stored, q8_0, q4_0, q4_k");
}

const char* weights_quant_name(WeightsQuant w) {
  switch (w) {
    case WeightsQuant::q8_0:
      return "q8_0";
    case WeightsQuant::q4_0:
      return "q4_0";
    case WeightsQuant::q4_k:
      return "q4_k";
    case WeightsQuant::stored:
      break;
  }
  return "stored";
}

kernels::DType quantized_dtype(WeightsQuant w, kernels::DType stored, int64_t k, bool lm_head) {
  using kernels::DType;
  if (w == WeightsQuant::stored || kernels::dtype_is_quantized(stored)) return stored;
  DType want = lm_head || w == WeightsQuant::q8_0 ? DType::q8_0
               : w == WeightsQuant::q4_0          ? DType::q4_0
                                                  : DType::q4_k;
  // Rows with no whole 256-blocks: q5_0, llama.cpp's fallback for Q4_K (its Q4_K_M files hold them so).
  if (want == DType::q4_k && k % kernels::dtype_block_elems(DType::q4_k) != 0) want = DType::q5_0;
  return k % kernels::dtype_block_elems(want) == 0 ? want : stored;
}

kernels::PackedMatrix quantize_rows(const std::vector<const TensorView*>& parts, kernels::DType target) {
  const int64_t k = parts[0]->shape[1];
  // Row r of the concatenation: part p, row r - first[p].
  std::vector<int64_t> first;
  int64_t n = 0;
  for (const TensorView* p : parts) {
    first.push_back(n);
    n += p->shape[0];
  }
  const size_t row_bytes = kernels::dtype_row_bytes(target, k);
  std::vector<uint8_t> blocks(static_cast<size_t>(n) * row_bytes);
  // Rows are independent: quantize them on every hardware thread (loading is
  // otherwise single-threaded; a 0.5B model is ~3 s of quantization on one core).
  ThreadPool pool(0);
  pool.parallel_for(n, 64, [&](int64_t begin, int64_t end, int) {
    std::vector<float> row(static_cast<size_t>(k));
    size_t p = std::upper_bound(first.begin(), first.end(), begin) - first.begin() - 1;
    for (int64_t r = begin; r < end; ++r) {
      while (p + 1 < parts.size() && r >= first[p + 1]) ++p;
      const TensorView* t = parts[p];
      const size_t src_row = kernels::dtype_row_bytes(t->dtype, k);  // any dtype, block types too
      kernels::to_f32(t->data + static_cast<size_t>(r - first[p]) * src_row, t->dtype, k, row.data());
      kernels::quantize(row.data(), target, k, blocks.data() + static_cast<size_t>(r) * row_bytes);
    }
  });
  return kernels::PackedMatrix::pack(blocks.data(), target, n, k);
}

}  // namespace tandem::model
