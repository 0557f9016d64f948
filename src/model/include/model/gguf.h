// GGUF: memory-mapped reading of llama.cpp's single-file model format (v2, v3).
//
// A GgufFile maps one file and validates all of it when opened: magic, version
// (2 or 3, little-endian), the tensor and key/value counts, every key and
// value (all thirteen value types; arrays, also nested, up to kMaxArrayDepth),
// `general.alignment` (a power of two), and each tensor info — name (unique,
// at most kMaxTensorName bytes), 1..4 dimensions of at least 1, a known type
// id, the first dimension a multiple of the type's block size, the offset
// aligned, the bytes inside the file, and no two tensors overlapping. Nothing
// is allocated from a count before the bytes it describes were read, so a
// hostile file costs at most memory proportional to its size.
//
// Metadata values are views into the mapping: strings are string_views and
// scalar arrays keep a pointer to their raw little-endian elements. Everything
// stays valid while the GgufFile lives; it is read-only after open and safe to
// share between threads. Errors are Status values naming the file, the key or
// the tensor and what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace tandem::model {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kMaxArrayDepth = 8;
inline constexpr size_t kMaxTensorName = 64;  // GGML_MAX_NAME, as the spec requires
inline constexpr int kMaxTensorDims = 4;

enum class GgufValueType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
const char* gguf_value_type_name(GgufValueType type);

// ggml tensor types as GGUF stores them (the ids are the file format's).
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
};

// Elements per block and bytes per block of a tensor type; false for an id
// this reader does not know (its size cannot be computed).
struct GgmlTypeTraits {
  const char* name;  // "Q8_0", as llama.cpp prints it
  uint32_t block_elements;
  uint32_t block_bytes;
};
bool ggml_type_traits(uint32_t type_id, GgmlTypeTraits* out);
// "Q8_0"; "type 77" for an unknown id.
std::string ggml_type_name(uint32_t type_id);

struct GgufValue {
  GgufValueType type = GgufValueType::uint8;
  // Scalars: integers in `integer` (uint64 above INT64_MAX in `uinteger` only,
  // with `integer` = -1), float32/float64 in `real`, bool in `integer` (0/1).
  int64_t integer = 0;
  uint64_t uinteger = 0;
  double real = 0;
  std::string_view string;
  // Arrays: element type and count; scalar elements are raw little-endian
  // values at `elements` (count × element size bytes), strings in `strings`,
  // nested arrays in `arrays`.
  GgufValueType element_type = GgufValueType::uint8;
  uint64_t count = 0;
  const uint8_t* elements = nullptr;
  std::vector<std::string_view> strings;
  std::vector<GgufValue> arrays;

  bool is_integer() const;  // any integer type (not bool)
  bool is_float() const { return type == GgufValueType::float32 || type == GgufValueType::float64; }
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;          // a GgmlType id known to ggml_type_traits
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (column) dimension
  uint64_t offset = 0;        // relative to the data section
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;

  int64_t numel() const;
  // Row-major shape as safetensors / PyTorch write it: dims reversed.
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  // Opens `path`; when it is the first file of a split model (`split.count` > 1,
  // llama.cpp's NAME-00001-of-0000N.gguf), also its other splits, whose tensors
  // join this file's (metadata is the first file's; each split must say its
  // split.no and the same split.count; tensor names unique across all).
  static Expected<GgufFile> open(const std::string& path);
  // Validates an in-memory image exactly as open() does (fuzzing, tests);
  // `path` only names it in errors; `data` must outlive the result.
  static Expected<GgufFile> parse(const uint8_t* data, size_t size, const std::string& path);

  GgufFile() = default;
  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // of this (the first) file
  // Files whose tensors this holds: 1, or split.count once open() found every split.
  int64_t split_files() const { return split_files_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // MappedFile::drop_resident_pages on every split's mapping (none for parse()).
  void drop_resident_pages() const;

  // nullptr when absent.
  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed getters: not_found naming the key when absent, invalid_argument
  // naming the key and both types when the stored type does not fit.
  Expected<int64_t> get_int(std::string_view key) const;   // any integer type (uint64 must fit int64)
  Expected<double> get_float(std::string_view key) const;  // float32/float64 or an integer
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  Expected<std::vector<float>> get_float_array(std::string_view key) const;    // float32/float64 elements
  Expected<std::vector<int32_t>> get_int32_array(std::string_view key) const;  // integer elements in int32

 private:
  static Expected<GgufFile> open_one(const std::string& path);
  Status parse_image(const uint8_t* data, uint64_t size);
  Status open_splits();

  MappedFile file_;                     // empty for parse()
  std::vector<MappedFile> split_maps_;  // the other splits' mappings (open_splits)
  int64_t split_files_ = 1;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tandem::model
