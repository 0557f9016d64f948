// device_weights.cpp — uploading a Model's weights to a CUDA device
// (device_weights.h).
//
// The bytes travel through two pinned staging chunks (ADR 0048): the host
// fills one chunk — a matrix's rows unpacked from the CPU panels, or a table
// copied — on a small thread pool while the other chunk's DMA runs on its own
// stream; a chunk is refilled only once its stream has drained. Pageable
// copies (the driver's bounce buffer, the call waiting for each) and
// whole-matrix temporaries are what made an 8B upload take a minute.
#include "device_weights.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/bf16_terms.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_pinned.h"
#include "kernels/unpack.h"
#include "model/model.h"

namespace tandem::model {
namespace {

namespace gpu = kernels::gpu;

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return end != nullptr && *end == '\0' ? static_cast<size_t>(n) : fallback;
}

// Fills stage bytes for units [first, first + count) of one destination.
using Fill = std::function<void(uint8_t* stage, size_t first, size_t count)>;

class StagedUploader {
 public:
  // TANDEM_CUDA_UPLOAD_CHUNK_MIB (default 64) sizes each chunk;
  // TANDEM_CUDA_UPLOAD=pageable stages in ordinary memory instead (for
  // comparison: then every copy waits).
  static Expected<std::unique_ptr<StagedUploader>> create() {
    std::unique_ptr<StagedUploader> u(new StagedUploader());
    u->chunk_ = std::max<size_t>(1, env_size("TANDEM_CUDA_UPLOAD_CHUNK_MIB", 64)) << 20;
    const char* mode = std::getenv("TANDEM_CUDA_UPLOAD");
    u->pinned_ = mode == nullptr || std::string(mode) != "pageable";
    for (Slot& s : u->slots_) {
      auto stream = gpu::Stream::create();
      if (!stream.ok()) return stream.status();
      s.stream = std::move(stream).value();
      if (u->pinned_) {
        auto buffer = gpu::PinnedBuffer::allocate(u->chunk_);
        if (!buffer.ok()) {  // e.g. a locked-memory limit: slower, still correct
          spdlog::warn("cuda: no pinned staging memory ({}); uploading from pageable memory",
                       buffer.status().to_string());
          u->pinned_ = false;
        } else {
          s.pinned = std::move(buffer).value();
        }
      }
    }
    for (Slot& s : u->slots_) {
      if (!u->pinned_) s.pageable.resize(u->chunk_);
      s.data = u->pinned_ ? s.pinned.as<uint8_t>() : s.pageable.data();
    }
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    u->pool_ = std::make_unique<ThreadPool>(static_cast<int>(std::min(cores, 16u)));
    return u;
  }

  ThreadPool& pool() { return *pool_; }
  bool pinned() const { return pinned_; }
  size_t chunk_bytes() const { return chunk_; }

  // Copies units * unit_bytes bytes to `device`, each chunk produced by fill;
  // `granule` units stay together in a chunk (a matrix's 64-row panels).
  Status put(void* device, size_t units, size_t unit_bytes, size_t granule, const Fill& fill) {
    const size_t per_chunk = std::max<size_t>(granule, chunk_ / unit_bytes / granule * granule);
    if (per_chunk * unit_bytes > chunk_) return invalid_argument("cuda upload: a unit outgrows the chunk");
    for (size_t first = 0; first < units; first += per_chunk) {
      const size_t count = std::min(per_chunk, units - first);
      Slot& s = slots_[next_];
      next_ = 1 - next_;
      TANDEM_RETURN_IF_ERROR(s.stream.synchronize());  // its previous copy has read the chunk
      fill(s.data, first, count);
      TANDEM_RETURN_IF_ERROR(gpu::copy_async(s.stream, static_cast<uint8_t*>(device) + first * unit_bytes,
                                             s.data, count * unit_bytes));
    }
    return Status::Ok();
  }
  Status finish() {
    for (Slot& s : slots_) TANDEM_RETURN_IF_ERROR(s.stream.synchronize());
    return Status::Ok();
  }

 private:
  struct Slot {
    gpu::Stream stream;
    gpu::PinnedBuffer pinned;
    std::vector<uint8_t> pageable;
    uint8_t* data = nullptr;
  };
  StagedUploader() = default;
  size_t chunk_ = 0;
  bool pinned_ = true;
  Slot slots_[2];
  int next_ = 0;
  std::unique_ptr<ThreadPool> pool_;
};

struct Uploader {
  StagedUploader& staged;
  size_t bytes = 0;
  int max_terms = 1;           // the most bf16 terms of a split matrix (ADR 0083)
  int64_t widest_split_k = 0;  // the widest terms · k of one

  Expected<gpu::DeviceBuffer> raw(const void* host, size_t size) {
    auto buffer = gpu::DeviceBuffer::allocate(size);
    if (!buffer.ok()) return buffer.status();
    TANDEM_RETURN_IF_ERROR(copy(buffer->data(), host, size));
    bytes += size;
    return buffer;
  }
  // `size` bytes from `host` to `device` through the staging chunks.
  Status copy(void* device, const void* host, size_t size) {
    const auto* src = static_cast<const uint8_t*>(host);
    ThreadPool& pool = staged.pool();
    return staged.put(device, size, 1, 1, [&](uint8_t* stage, size_t first, size_t n) {
      pool.parallel_for(static_cast<int64_t>(n), int64_t{1} << 20, [&](int64_t b, int64_t e, int) {
        std::memcpy(stage + b, src + first + static_cast<size_t>(b), static_cast<size_t>(e - b));
      });
    });
  }
  Status floats(const std::vector<float>& host, gpu::DeviceBuffer& out) {
    if (host.empty()) return Status::Ok();
    auto buffer = raw(host.data(), host.size() * sizeof(float));
    if (!buffer.ok()) return buffer.status();
    out = std::move(buffer).value();
    return Status::Ok();
  }
  // A float matrix relaid (ADR 0057): bf16 as it is; f16 / f32 as the sum of
  // 2 / 3 bf16 terms, rows [t0 | t1 (| t2)] over k' = bf16_terms_k(k, terms)
  // (ADR 0083), as is a bf16 one whose k is not a multiple of 8 (one padded term).
  Status float_matrix(const kernels::PackedMatrix& m, DeviceMatrix& out) {
    const int terms = kernels::bf16_terms(m.dtype());
    const int64_t k = m.k(), split_k = kernels::bf16_split_k(m.dtype(), k);
    if (split_k == 0)
      return relaid_rows(m.n(), k, out.data, [&](int64_t first, int64_t rows, uint16_t* dst) {
        kernels::unpack_rows(m, first, rows, dst);
      });
    out.terms = terms;
    out.repeated = true;
    max_terms = std::max(max_terms, terms);
    widest_split_k = std::max(widest_split_k, split_k);
    const size_t row_bytes = kernels::dtype_row_bytes(m.dtype(), k);
    return relaid_rows(m.n(), split_k, out.data, [&](int64_t first, int64_t rows, uint16_t* dst) {
      std::vector<uint8_t> raw(static_cast<size_t>(rows) * row_bytes);
      std::vector<float> values(static_cast<size_t>(rows * k));
      kernels::unpack_rows(m, first, rows, raw.data());
      kernels::to_f32(raw.data(), m.dtype(), rows * k, values.data());
      kernels::split_bf16_terms(values.data(), rows, k, terms, dst);
    });
  }
  // A projection: a float matrix as above, or quantized (ADR 0077): each part's
  // packed bytes (PackedMatrix::data()) copied as they are, 256-byte aligned;
  // with `f32_ok` (routers, shared-expert gates: ADR 0080) f32 natural rows.
  Status matrix(const kernels::PackedMatrix& m, const std::string& name, DeviceMatrix& out,
                bool f32_ok = false) {
    if (m.n() == 0) return Status::Ok();
    if (f32_ok && m.dtype() == kernels::DType::f32 && m.parts().empty()) {
      std::vector<float> rows(static_cast<size_t>(m.n() * m.k()));
      kernels::unpack_rows(m, 0, m.n(), rows.data());
      TANDEM_RETURN_IF_ERROR(floats(rows, out.data));
      out.f32 = true;
      return Status::Ok();
    }
    const auto refuse = [&](kernels::DType d) {
      return failed_precondition("cuda: weight " + name + " is " + kernels::dtype_name(d) +
                                 "; the CUDA backend takes bf16, f16, f32, q8_0, q4_0, q5_0, q4_k, q5_k and "
                                 "q6_k weights (use --device cpu)");
    };
    if (m.parts().empty() && !kernels::dtype_is_quantized(m.dtype())) {
      if (kernels::bf16_terms(m.dtype()) == 0) return refuse(m.dtype());
      return float_matrix(m, out);
    }
    std::vector<const kernels::PackedMatrix*> parts;
    if (m.parts().empty()) parts.push_back(&m);
    for (const kernels::PackedMatrix& p : m.parts()) parts.push_back(&p);
    size_t total = 0;
    int64_t column = 0;
    for (const kernels::PackedMatrix* p : parts) {
      if (!gpu::gemm_quant_supports(p->dtype())) return refuse(p->dtype());
      out.parts.push_back({p->dtype(), p->n(), column, total});
      total += (p->data_bytes() + 255) / 256 * 256;
      column += p->n();
    }
    auto buffer = gpu::DeviceBuffer::allocate(total);
    if (!buffer.ok()) return buffer.status();
    for (size_t i = 0; i < parts.size(); ++i)
      TANDEM_RETURN_IF_ERROR(
          copy(buffer->as<uint8_t>() + out.parts[i].offset, parts[i]->data(), parts[i]->data_bytes()));
    bytes += total;
    out.data = std::move(buffer).value();
    return Status::Ok();
  }
  // A table [rows][k] of any dtype but bf16 (a quantized GGUF embedding)
  // dequantized to f32 rows (kernels::to_f32, the CPU's lookup).
  Status f32_table(const void* host, kernels::DType dtype, int64_t rows, int64_t k, gpu::DeviceBuffer& out) {
    const size_t row_bytes = static_cast<size_t>(k) * sizeof(float);
    const size_t src_row = kernels::dtype_row_bytes(dtype, k);
    auto buffer = gpu::DeviceBuffer::allocate(static_cast<size_t>(rows) * row_bytes);
    if (!buffer.ok()) return buffer.status();
    const auto* src = static_cast<const uint8_t*>(host);
    ThreadPool& pool = staged.pool();
    TANDEM_RETURN_IF_ERROR(staged.put(
        buffer->data(), static_cast<size_t>(rows), row_bytes, 1, [&](uint8_t* stage, size_t first, size_t n) {
          pool.parallel_for(static_cast<int64_t>(n), 64, [&](int64_t b, int64_t e, int) {
            kernels::to_f32(src + (first + static_cast<size_t>(b)) * src_row, dtype, (e - b) * k,
                            reinterpret_cast<float*>(stage + static_cast<size_t>(b) * row_bytes));
          });
        }));
    bytes += buffer->bytes();
    out = std::move(buffer).value();
    return Status::Ok();
  }
  // A bf16 table [n][k] (the tied LM head) as a GEMM weight: relaid.
  Status relaid_table(const uint16_t* host, int64_t n, int64_t k, gpu::DeviceBuffer& out) {
    return relaid_rows(n, k, out, [&](int64_t first, int64_t rows, uint16_t* dst) {
      std::memcpy(dst, host + first * k, static_cast<size_t>(rows * k) * sizeof(uint16_t));
    });
  }
  // The GEMM weight layout (ADR 0057): natural rows from `rows_of` (first,
  // count, dst), relaid on the staging threads (gpu::relay_weights_bf16_host).
  Status relaid_rows(int64_t n_rows, int64_t k, gpu::DeviceBuffer& out,
                     const std::function<void(int64_t, int64_t, uint16_t*)>& rows_of) {
    const size_t row_bytes = static_cast<size_t>(gpu::relaid_row_pitch(k)) * sizeof(uint16_t);
    auto buffer = gpu::DeviceBuffer::allocate(static_cast<size_t>(n_rows) * row_bytes);
    if (!buffer.ok()) return buffer.status();
    ThreadPool& pool = staged.pool();
    constexpr int64_t kPanelRows = 64;  // the packed panel: a thread's rows start at a panel
    TANDEM_RETURN_IF_ERROR(
        staged.put(buffer->data(), static_cast<size_t>(n_rows), row_bytes, kPanelRows,
                   [&](uint8_t* stage, size_t first, size_t n) {
                     pool.parallel_for(static_cast<int64_t>(n), kPanelRows, [&](int64_t b, int64_t e, int) {
                       std::vector<uint16_t> natural(static_cast<size_t>((e - b) * k));
                       rows_of(static_cast<int64_t>(first) + b, e - b, natural.data());
                       gpu::relay_weights_bf16_host(
                           natural.data(), e - b, k,
                           reinterpret_cast<uint16_t*>(stage + static_cast<size_t>(b) * row_bytes));
                     });
                   }));
    bytes += buffer->bytes();
    out = std::move(buffer).value();
    return Status::Ok();
  }
};

// Gemma 4's model-level extras: the per-layer input table, projection and norm,
// and the ones vector of the weightless norms.
Status upload_gemma4(const Model& model, Uploader& up, DeviceWeights& w) {
  const ModelConfig& c = model.config();
  if (c.v_norm || c.moe_beside_mlp) {
    int64_t width = c.hidden_size;
    for (int l = 0; l < c.num_layers; ++l) width = std::max<int64_t>(width, c.layer_head_dim(l));
    TANDEM_RETURN_IF_ERROR(up.floats(std::vector<float>(static_cast<size_t>(width), 1.0f), w.ones));
  }
  if (c.per_layer_input <= 0) return Status::Ok();
  const int64_t width = static_cast<int64_t>(c.per_layer_input) * c.num_layers;
  if (model.per_layer_embedding_dtype() == kernels::DType::bf16) {
    const size_t table = static_cast<size_t>(c.per_layer_vocab) * width * sizeof(uint16_t);
    auto emb = up.raw(model.per_layer_embedding(), table);
    if (!emb.ok()) return emb.status();
    w.per_layer_embedding = std::move(emb).value();
  } else {  // f16 / f32 (or quantized) rows as f32, the CPU's lookup
    TANDEM_RETURN_IF_ERROR(up.f32_table(model.per_layer_embedding(), model.per_layer_embedding_dtype(),
                                        c.per_layer_vocab, width, w.per_layer_embedding));
    w.per_layer_embedding_f32 = true;
  }
  TANDEM_RETURN_IF_ERROR(up.matrix(model.per_layer_model_projection(), "per_layer_model_projection",
                                   w.per_layer_model_projection));
  return up.floats(model.per_layer_projection_norm(), w.per_layer_projection_norm);
}

}  // namespace

bool DeviceWeights::any_quantized() const {
  if ((lm_head != nullptr && lm_head->quantized()) || per_layer_model_projection.quantized()) return true;
  return std::any_of(layers.begin(), layers.end(), [](const DeviceLayer& l) {
    const auto expert = [](const DeviceExpert& e) { return e.gate_up.quantized() || e.down.quantized(); };
    return l.qkv.quantized() || l.o.quantized() || l.gate_up.quantized() || l.down.quantized() ||
           l.router.quantized() || l.shared_expert_gate.quantized() || expert(l.shared_expert) ||
           l.per_layer_gate.quantized() || l.per_layer_projection.quantized() ||
           std::any_of(l.experts.begin(), l.experts.end(), expert);
  });
}

Expected<std::unique_ptr<DeviceWeights>> DeviceWeights::upload(const Model& model, int device,
                                                               const DeviceWeights* borrowed) {
  const auto t0 = std::chrono::steady_clock::now();
  TANDEM_RETURN_IF_ERROR(gpu::set_device(device));
  auto staged = StagedUploader::create();
  if (!staged.ok()) return staged.status();
  auto w = std::make_unique<DeviceWeights>();
  w->device = device;
  Uploader up{**staged};
  const ModelConfig& c = model.config();
  w->layers.resize(model.layers().size());
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const LayerWeights& src = model.layers()[l];
    DeviceLayer& dst = w->layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    TANDEM_RETURN_IF_ERROR(up.floats(src.attn_norm, dst.attn_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.qkv, p + "qkv", dst.qkv));
    TANDEM_RETURN_IF_ERROR(up.floats(src.qkv_bias, dst.qkv_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.q_norm, dst.q_norm));
    TANDEM_RETURN_IF_ERROR(up.floats(src.k_norm, dst.k_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.o, p + "o_proj", dst.o));
    TANDEM_RETURN_IF_ERROR(up.floats(src.o_bias, dst.o_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.mlp_norm, dst.mlp_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.gate_up, p + "gate_up", dst.gate_up));
    TANDEM_RETURN_IF_ERROR(up.floats(src.gate_up_bias, dst.gate_up_bias));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.down, p + "down_proj", dst.down));
    TANDEM_RETURN_IF_ERROR(up.floats(src.down_bias, dst.down_bias));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_attn_norm, dst.post_attn_norm));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_mlp_norm, dst.post_mlp_norm));
    TANDEM_RETURN_IF_ERROR(up.matrix(src.per_layer_gate, p + "per_layer_input_gate", dst.per_layer_gate));
    TANDEM_RETURN_IF_ERROR(
        up.matrix(src.per_layer_projection, p + "per_layer_projection", dst.per_layer_projection));
    TANDEM_RETURN_IF_ERROR(up.floats(src.post_per_layer_norm, dst.post_per_layer_norm));
    for (auto [host, device] :
         {std::pair{&src.router_scale, &dst.router_scale},
          std::pair{&src.per_expert_scale, &dst.per_expert_scale}, std::pair{&src.moe_norm, &dst.moe_norm},
          std::pair{&src.post_mlp_dense_norm, &dst.post_mlp_dense_norm},
          std::pair{&src.post_moe_norm, &dst.post_moe_norm}})
      TANDEM_RETURN_IF_ERROR(up.floats(*host, *device));
    if (src.experts.empty()) continue;
    TANDEM_RETURN_IF_ERROR(up.matrix(src.router, p + "router", dst.router, true));
    dst.experts.resize(src.experts.size());
    for (size_t e = 0; e < src.experts.size(); ++e) {
      const std::string ep = p + "expert " + std::to_string(e) + " ";
      TANDEM_RETURN_IF_ERROR(up.matrix(src.experts[e].gate_up, ep + "gate_up", dst.experts[e].gate_up));
      TANDEM_RETURN_IF_ERROR(up.matrix(src.experts[e].down, ep + "down_proj", dst.experts[e].down));
    }
    if (c.moe.shared_intermediate > 0) {
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert.gate_up, p + "shared expert gate_up", dst.shared_expert.gate_up));
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert.down, p + "shared expert down_proj", dst.shared_expert.down));
      TANDEM_RETURN_IF_ERROR(
          up.matrix(src.shared_expert_gate, p + "shared_expert_gate", dst.shared_expert_gate, true));
    }
  }
  TANDEM_RETURN_IF_ERROR(up.floats(model.final_norm(), w->final_norm));
  TANDEM_RETURN_IF_ERROR(up.floats(model.rope_inv_freq(), w->inv_freq));
  for (int l = 0; l < c.num_layers; ++l) {
    // The local table (gemma3), uploaded once if any layer uses it.
    if (&model.rope_inv_freq(l) == &model.rope_inv_freq() || w->local_inv_freq.bytes()) continue;
    TANDEM_RETURN_IF_ERROR(up.floats(model.rope_inv_freq(l), w->local_inv_freq));
  }
  TANDEM_RETURN_IF_ERROR(upload_gemma4(model, up, *w));
  if (borrowed != nullptr) {
    w->embedding = borrowed->embedding;
    w->embedding_f32 = borrowed->embedding_f32;
    w->lm_head = borrowed->lm_head;
  } else {
    const bool bf16_table = model.embedding_dtype() == kernels::DType::bf16;
    if (bf16_table) {
      const size_t table = static_cast<size_t>(c.vocab_size) * c.hidden_size * sizeof(uint16_t);
      auto emb = up.raw(model.embedding(), table);
      if (!emb.ok()) return emb.status();
      w->own_embedding = std::move(emb).value();
      w->embedding = w->own_embedding.as<uint16_t>();
    } else {
      TANDEM_RETURN_IF_ERROR(up.f32_table(model.embedding(), model.embedding_dtype(), c.vocab_size,
                                          c.hidden_size, w->own_embedding));
      w->embedding_f32 = w->own_embedding.as<float>();
    }
    if (c.tie_word_embeddings && bf16_table && model.lm_head().dtype() == kernels::DType::bf16) {
      // The gather reads natural rows, the head GEMM relaid ones (ADR 0057).
      TANDEM_RETURN_IF_ERROR(up.relaid_table(static_cast<const uint16_t*>(model.embedding()), c.vocab_size,
                                             c.hidden_size, w->own_lm_head.data));
    } else {  // untied, or a quantized head (a tied quantized table is packed as one)
      TANDEM_RETURN_IF_ERROR(up.matrix(model.lm_head(), "lm_head", w->own_lm_head));
    }
    w->lm_head = &w->own_lm_head;
  }
  TANDEM_RETURN_IF_ERROR((*staged)->finish());
  w->bytes = up.bytes;
  w->max_terms = up.max_terms;
  w->widest_split_k = up.widest_split_k;
  if (up.max_terms > 1)
    spdlog::info(
        "cuda: f16 / f32 matrices stored as exact sums of bf16 terms (2 per f16 weight, 3 per f32 weight; "
        "ADR 0083): they stream 2x / 1.5x their file bytes");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info(
      "cuda: uploaded {:.2f} GB of weights to cuda:{} in {:.2f} s ({:.1f} GB/s; {} staging 2 x {} MiB, "
      "{} threads)",
      w->bytes / 1e9, device, s, w->bytes / 1e9 / std::max(s, 1e-9),
      (*staged)->pinned() ? "pinned" : "pageable", (*staged)->chunk_bytes() >> 20, (*staged)->pool().size());
  return w;
}

}  // namespace tandem::model
