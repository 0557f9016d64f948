// safetensors: memory-mapped reading of Hugging Face .safetensors checkpoints.
//
// A SafetensorsFile maps one file and validates its whole header when opened:
// the 8-byte header length (bounded by the file size and kMaxHeaderBytes), the
// JSON, each tensor's dtype (F32, F16, BF16 — any other dtype is an error),
// shape × dtype size == byte length, offsets inside
// the data section and no two tensors overlapping. A Checkpoint opens a model
// directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` (every listed tensor must exist in the shard
// the index names).
//
// Errors are Status values naming the file and, where one is involved, the
// tensor. TensorView points into the mapping: it stays valid while the
// SafetensorsFile / Checkpoint that produced it lives. Read-only after open;
// concurrent readers are fine.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "kernels/ops.h"

namespace tandem::model {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MiB, as the reference reader

// One tensor inside a mapped file.
struct TensorView;
// The tensor's bytes with its rows in Hugging Face order: `v.data` itself, or
// `scratch` filled with the rows reordered (rope_group_rows, ADR 0011). Works
// for any row-major tensor whose rows are whole bytes (block-quantized too).
const uint8_t* rows_in_hf_order(const TensorView& v, std::vector<uint8_t>& scratch);

struct TensorView {
  std::string name;
  std::string file;  // path of the file holding it, for error messages
  kernels::DType dtype = kernels::DType::f32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  // GGUF llama/mistral attn_q/attn_k (ADR 0011): within each group of
  // `rope_group_rows` rows (one head) the file stores the two RoPE halves
  // interleaved — stored row 2i is HF row i, stored row 2i+1 is HF row
  // group/2 + i. 0: rows are in Hugging Face order (every safetensors tensor).
  int64_t rope_group_rows = 0;

  int64_t numel() const;
  // "[896, 4864]"
  std::string shape_string() const;
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);
  // Validates an in-memory file image exactly as open() does (for fuzzing and
  // tests); `path` only names it in errors. The views point into `data`,
  // which must outlive the result.
  static Expected<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  // MappedFile::drop_resident_pages on the file's mapping (none for parse()).
  void drop_resident_pages() const { file_.drop_resident_pages(); }

 private:
  Status parse_image(const uint8_t* base, uint64_t size);

  MappedFile file_;  // empty for parse()
  std::string path_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory, single-file or sharded.
class Checkpoint {
 public:
  static Expected<Checkpoint> open_dir(const std::string& dir);
  // A checkpoint over views another validating reader made (model/gguf_model.h):
  // `owner` keeps the memory they point into alive; `source` names it (the
  // GGUF file) in errors. Names must be unique.
  // `drop_pages` does what drop_resident_pages() should for that memory
  // (nothing when empty: memory that is not a file mapping).
  static Checkpoint from_views(std::string source, std::vector<TensorView> views,
                               std::shared_ptr<const void> owner, std::function<void()> drop_pages = {});

  const std::string& dir() const { return dir_; }
  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  // not_found naming the tensor and the directory when absent.
  Expected<const TensorView*> get(const std::string& name) const;
  // get() plus a shape check; invalid_argument naming file, tensor, expected
  // and actual shape on mismatch.
  Expected<const TensorView*> get(const std::string& name, const std::vector<int64_t>& shape) const;
  size_t tensor_count() const { return index_.size(); }
  // Total bytes of tensor data across all files.
  size_t total_bytes() const;
  // Drops the files' pages from the process's resident set (the views stay
  // valid: a later read faults its pages in again). Model::load calls it once
  // the matrices are packed (ADR 0065).
  void drop_resident_pages() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::unique_ptr<TensorView>> views_;  // from_views
  std::shared_ptr<const void> owner_;               // from_views
  std::function<void()> drop_pages_;                // from_views
  std::map<std::string, const TensorView*> index_;
};

// Writes a .safetensors file (for tools and tests). Tensors are written in
// the given order, data offsets packed back to back.
struct TensorToWrite {
  std::string name;
  kernels::DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // numel * dtype_size bytes
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace tandem::model
