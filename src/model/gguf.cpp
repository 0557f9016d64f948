#include "model/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace tandem::model {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kMaxAlignment = 1u << 20;

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::uint16:
    case GgufValueType::int16:
      return 2;
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::float32:
      return 4;
    case GgufValueType::uint64:
    case GgufValueType::int64:
    case GgufValueType::float64:
      return 8;
    default:
      return 0;  // string, array: variable
  }
}

// Bounds-checked little-endian reads over the image; every failure is a
// Status naming the file and what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status error(const std::string& what) const {
    return invalid_argument(path_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " +
                            std::to_string(size_) + ")");
  }
  Status truncated(const std::string& what) const {
    return invalid_argument(path_ + ": file truncated while reading " + what + " (at byte " +
                            std::to_string(pos_) + " of " + std::to_string(size_) + ")");
  }

  template <typename T>
  Status read(T& out, const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status read_bytes(uint64_t n, const uint8_t*& out, const std::string& what) {
    if (remaining() < n) return truncated(what);
    out = data_ + pos_;
    pos_ += n;
    return Status::Ok();
  }
  Status read_string(std::string_view& out, const std::string& what) {
    uint64_t length = 0;
    TANDEM_RETURN_IF_ERROR(read(length, what + " length"));
    if (length > remaining())
      return error(what + " has length " + std::to_string(length) + ", beyond the end of the file");
    out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::float64); }

Status read_value(Cursor& c, GgufValueType type, GgufValue& out, const std::string& what, int depth);

Status read_array(Cursor& c, GgufValue& out, const std::string& what, int depth) {
  if (depth >= kMaxArrayDepth)
    return c.error(what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  uint32_t element = 0;
  TANDEM_RETURN_IF_ERROR(c.read(element, what + " element type"));
  if (!valid_value_type(element))
    return c.error(what + ": unknown array element type " + std::to_string(element));
  out.element_type = static_cast<GgufValueType>(element);
  TANDEM_RETURN_IF_ERROR(c.read(out.count, what + " element count"));
  if (const size_t size = scalar_size(out.element_type); size > 0) {
    if (out.count > c.remaining() / size)
      return c.error(what + ": " + std::to_string(out.count) + " elements of " +
                     gguf_value_type_name(out.element_type) + " do not fit in the file");
    return c.read_bytes(out.count * size, out.elements, what);
  }
  // Strings take at least 8 bytes, arrays at least 12: a count the file cannot hold fails here,
  // before anything is allocated for it.
  const uint64_t min_size = out.element_type == GgufValueType::string ? 8 : 12;
  if (out.count > c.remaining() / min_size)
    return c.error(what + ": " + std::to_string(out.count) + " elements of " +
                   gguf_value_type_name(out.element_type) + " do not fit in the file");
  if (out.element_type == GgufValueType::string) {
    out.strings.resize(out.count);
    for (uint64_t i = 0; i < out.count; ++i)
      TANDEM_RETURN_IF_ERROR(c.read_string(out.strings[i], what + "[" + std::to_string(i) + "]"));
    return Status::Ok();
  }
  out.arrays.resize(out.count);
  for (uint64_t i = 0; i < out.count; ++i)
    TANDEM_RETURN_IF_ERROR(
        read_value(c, GgufValueType::array, out.arrays[i], what + "[" + std::to_string(i) + "]", depth + 1));
  return Status::Ok();
}

template <typename T>
Status read_integer(Cursor& c, GgufValue& out, const std::string& what) {
  T v{};
  TANDEM_RETURN_IF_ERROR(c.read(v, what));
  if constexpr (std::is_same_v<T, uint64_t>) {
    out.uinteger = v;
    out.integer =
        v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(v);
  } else {
    out.integer = static_cast<int64_t>(v);
    out.uinteger = static_cast<uint64_t>(v);
  }
  return Status::Ok();
}

Status read_value(Cursor& c, GgufValueType type, GgufValue& out, const std::string& what, int depth) {
  out.type = type;
  switch (type) {
    case GgufValueType::uint8:
      return read_integer<uint8_t>(c, out, what);
    case GgufValueType::int8:
      return read_integer<int8_t>(c, out, what);
    case GgufValueType::uint16:
      return read_integer<uint16_t>(c, out, what);
    case GgufValueType::int16:
      return read_integer<int16_t>(c, out, what);
    case GgufValueType::uint32:
      return read_integer<uint32_t>(c, out, what);
    case GgufValueType::int32:
      return read_integer<int32_t>(c, out, what);
    case GgufValueType::uint64:
      return read_integer<uint64_t>(c, out, what);
    case GgufValueType::int64:
      return read_integer<int64_t>(c, out, what);
    case GgufValueType::boolean: {
      uint8_t b = 0;
      TANDEM_RETURN_IF_ERROR(c.read(b, what));
      if (b > 1) return c.error(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      out.integer = b;
      out.uinteger = b;
      return Status::Ok();
    }
    case GgufValueType::float32: {
      float f = 0;
      TANDEM_RETURN_IF_ERROR(c.read(f, what));
      out.real = f;
      return Status::Ok();
    }
    case GgufValueType::float64:
      return c.read(out.real, what);
    case GgufValueType::string:
      return c.read_string(out.string, what);
    case GgufValueType::array:
      return read_array(c, out, what, depth);
  }
  return c.error(what + ": unknown value type " + std::to_string(static_cast<uint32_t>(type)));
}

Status read_tensor_info(Cursor& c, GgufTensor& t, uint64_t index) {
  const std::string what = "tensor info " + std::to_string(index);
  std::string_view name;
  TANDEM_RETURN_IF_ERROR(c.read_string(name, what + " name"));
  if (name.size() > kMaxTensorName)
    return c.error(what + ": name of " + std::to_string(name.size()) + " bytes is longer than " +
                   std::to_string(kMaxTensorName));
  if (name.empty()) return c.error(what + ": empty tensor name");
  t.name = std::string(name);
  const std::string tensor = "tensor \"" + t.name + "\"";
  uint32_t n_dims = 0;
  TANDEM_RETURN_IF_ERROR(c.read(n_dims, tensor + " dimension count"));
  if (n_dims < 1 || n_dims > kMaxTensorDims)
    return c.error(tensor + " has " + std::to_string(n_dims) + " dimensions (1 to " +
                   std::to_string(kMaxTensorDims) + " allowed)");
  t.dims.resize(n_dims);
  // Elements are bounded by 2^62 so that bytes (at most ~1.1 bytes per element) cannot overflow.
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    TANDEM_RETURN_IF_ERROR(c.read(dim, tensor + " dimension"));
    if (dim < 1 || dim > (uint64_t{1} << 62) / numel)
      return c.error(tensor + " dimension " + std::to_string(d) + " (" + std::to_string(dim) +
                     ") is zero or makes the tensor larger than 2^62 elements");
    numel *= dim;
    t.dims[d] = static_cast<int64_t>(dim);
  }
  TANDEM_RETURN_IF_ERROR(c.read(t.type, tensor + " type"));
  GgmlTypeTraits traits{};
  if (!ggml_type_traits(t.type, &traits))
    return c.error(tensor + " has unknown type id " + std::to_string(t.type));
  if (static_cast<uint64_t>(t.dims[0]) % traits.block_elements != 0)
    return c.error(tensor + " of type " + traits.name + ": first dimension " + std::to_string(t.dims[0]) +
                   " is not a multiple of the block size " + std::to_string(traits.block_elements));
  t.bytes = numel / traits.block_elements * traits.block_bytes;
  return c.read(t.offset, tensor + " offset");
}

}  // namespace

const char* gguf_value_type_name(GgufValueType type) {
  static const char* const kNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                       "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool ggml_type_traits(uint32_t id, GgmlTypeTraits* out) {
  struct Entry {
    uint32_t id;
    GgmlTypeTraits traits;
  };
  // Block sizes and bytes as ggml defines them (QK_K = 256).
  static constexpr Entry kTypes[] = {
      {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
      {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
      {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 40}},      {10, {"Q2_K", 256, 84}},
      {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
      {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}},
      {17, {"IQ2_XS", 256, 74}},  {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
      {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},  {22, {"IQ2_S", 256, 82}},
      {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
      {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},
      {29, {"IQ1_M", 256, 56}},   {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},
      {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
  };
  for (const Entry& e : kTypes) {
    if (e.id != id) continue;
    if (out != nullptr) *out = e.traits;
    return true;
  }
  return false;
}

std::string ggml_type_name(uint32_t id) {
  GgmlTypeTraits t{};
  return ggml_type_traits(id, &t) ? std::string(t.name) : "type " + std::to_string(id);
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::uint16:
    case GgufValueType::int16:
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::uint64:
    case GgufValueType::int64:
      return true;
    default:
      return false;
  }
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> GgufTensor::shape() const { return {dims.rbegin(), dims.rend()}; }

Expected<GgufFile> GgufFile::open_one(const std::string& path) {
  GgufFile f;
  TANDEM_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  f.path_ = path;
  TANDEM_RETURN_IF_ERROR(f.parse_image(f.file_.data(), f.file_.size()));
  return f;
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(GgufFile f, open_one(path));
  TANDEM_RETURN_IF_ERROR(f.open_splits());
  return f;
}

namespace {

constexpr int64_t kMaxSplits = 99999;  // five digits in llama.cpp's split names

// split.no and split.count of a file (0 and 1 when it has none).
Status split_keys(const GgufFile& f, int64_t& no, int64_t& count) {
  no = 0;
  count = 1;
  if (f.find("split.count") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(count, f.get_int("split.count"));
  }
  if (f.find("split.no") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(no, f.get_int("split.no"));
  }
  if (count < 1 || count > kMaxSplits || no < 0 || no >= count)
    return invalid_argument(f.path() + ": split.no " + std::to_string(no) + " / split.count " +
                            std::to_string(count) + " are not a split of 1 to " + std::to_string(kMaxSplits) +
                            " files");
  return Status::Ok();
}

std::string split_suffix(int64_t index, int64_t count) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "-%05lld-of-%05lld.gguf", static_cast<long long>(index + 1),
                static_cast<long long>(count));
  return buffer;
}

}  // namespace

Status GgufFile::open_splits() {
  int64_t no = 0, count = 1;
  TANDEM_RETURN_IF_ERROR(split_keys(*this, no, count));
  if (count == 1) return Status::Ok();
  const std::string first = split_suffix(0, count);
  if (no != 0 || path_.size() < first.size() ||
      path_.compare(path_.size() - first.size(), first.size(), first) != 0)
    return invalid_argument(path_ + ": split " + std::to_string(no + 1) + " of " + std::to_string(count) +
                            " of a split model; open its first file, NAME" + first);
  const std::string prefix = path_.substr(0, path_.size() - first.size());
  for (int64_t i = 1; i < count; ++i) {
    TANDEM_ASSIGN_OR_RETURN(GgufFile split, open_one(prefix + split_suffix(i, count)));
    int64_t split_no = 0, split_count = 1;
    TANDEM_RETURN_IF_ERROR(split_keys(split, split_no, split_count));
    if (split_no != i || split_count != count)
      return invalid_argument(split.path() + ": says split.no " + std::to_string(split_no) + " of " +
                              std::to_string(split_count) + ", expected " + std::to_string(i) + " of " +
                              std::to_string(count));
    for (GgufTensor& t : split.tensors_) {
      if (!tensor_index_.emplace(t.name, tensors_.size()).second)
        return invalid_argument(split.path() + ": tensor \"" + t.name + "\" is also in another split");
      tensors_.push_back(std::move(t));  // its data stays in split's mapping, kept below
    }
    split_maps_.push_back(std::move(split.file_));
  }
  split_files_ = count;
  return Status::Ok();
}

Expected<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& path) {
  GgufFile f;
  f.path_ = path;
  TANDEM_RETURN_IF_ERROR(f.parse_image(data, size));
  return f;
}

Status GgufFile::parse_image(const uint8_t* data, uint64_t size) {
  Cursor c(data, size, path_);
  uint32_t magic = 0;
  TANDEM_RETURN_IF_ERROR(c.read(magic, "the magic"));
  if (magic != kMagic)
    return invalid_argument(path_ + ": not a GGUF file (the first 4 bytes are not \"GGUF\")");
  TANDEM_RETURN_IF_ERROR(c.read(version_, "the version"));
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000u || version_ == 0x03000000u;
    return unimplemented(path_ + ": GGUF version " + std::to_string(version_) +
                         (swapped ? " (a big-endian file; only little-endian GGUF is supported)"
                                  : " is not supported (versions 2 and 3 are)"));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  TANDEM_RETURN_IF_ERROR(c.read(tensor_count, "the tensor count"));
  TANDEM_RETURN_IF_ERROR(c.read(kv_count, "the metadata count"));
  // A key/value takes at least 13 bytes and a tensor info at least 29: counts the file cannot hold
  // are rejected before anything is sized from them.
  if (kv_count > c.remaining() / 13)
    return c.error("metadata count " + std::to_string(kv_count) + " is more than the file can hold");
  if (tensor_count > c.remaining() / 29)
    return c.error("tensor count " + std::to_string(tensor_count) + " is more than the file can hold");
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string_view key;
    TANDEM_RETURN_IF_ERROR(c.read_string(key, "metadata key " + std::to_string(i)));
    const std::string what = "metadata \"" + std::string(key) + "\"";
    uint32_t type = 0;
    TANDEM_RETURN_IF_ERROR(c.read(type, what + " type"));
    if (!valid_value_type(type)) return c.error(what + " has unknown value type " + std::to_string(type));
    GgufValue value;
    TANDEM_RETURN_IF_ERROR(read_value(c, static_cast<GgufValueType>(type), value, what, 0));
    if (!metadata_.emplace(std::string(key), std::move(value)).second)
      return c.error("metadata key \"" + std::string(key) + "\" appears twice");
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::uint32)
      return invalid_argument(path_ + ": metadata \"general.alignment\" must be a uint32, got " +
                              gguf_value_type_name(a->type));
    const uint64_t v = a->uinteger;
    if (v == 0 || (v & (v - 1)) != 0 || v > kMaxAlignment)
      return invalid_argument(path_ + ": general.alignment " + std::to_string(v) +
                              " is not a power of two up to " + std::to_string(kMaxAlignment));
    alignment_ = static_cast<uint32_t>(v);
  }
  tensors_.resize(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TANDEM_RETURN_IF_ERROR(read_tensor_info(c, tensors_[i], i));
    if (!tensor_index_.emplace(tensors_[i].name, i).second)
      return c.error("tensor \"" + tensors_[i].name + "\" appears twice");
  }
  data_offset_ = (c.position() + alignment_ - 1) / alignment_ * alignment_;
  if (tensor_count > 0 && data_offset_ > size) return c.truncated("the padding before the data section");
  const uint64_t data_size = data_offset_ <= size ? size - data_offset_ : 0;
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(tensors_.size());
  for (GgufTensor& t : tensors_) {
    const std::string tensor = path_ + ": tensor \"" + t.name + "\"";
    if (t.offset % alignment_ != 0)
      return invalid_argument(tensor + " offset " + std::to_string(t.offset) +
                              " is not a multiple of the alignment " + std::to_string(alignment_));
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      return invalid_argument(
          tensor + " (" + std::to_string(t.bytes) + " bytes at offset " + std::to_string(t.offset) +
          ") lies beyond the end of the file (data section of " + std::to_string(data_size) + " bytes)");
    t.data = data + data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes)
      return invalid_argument(path_ + ": tensor \"" + by_offset[i]->name + "\" overlaps tensor \"" +
                              by_offset[i - 1]->name + "\" in the data section");
  }
  return Status::Ok();
}

void GgufFile::drop_resident_pages() const {
  file_.drop_resident_pages();
  for (const MappedFile& m : split_maps_) m.drop_resident_pages();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status missing(const std::string& path, std::string_view key) {
  return not_found(path + ": metadata \"" + std::string(key) + "\" is missing");
}
Status wrong_type(const std::string& path, std::string_view key, const char* want, const GgufValue& v) {
  std::string got = gguf_value_type_name(v.type);
  if (v.type == GgufValueType::array) got = std::string("array of ") + gguf_value_type_name(v.element_type);
  return invalid_argument(path + ": metadata \"" + std::string(key) + "\" must be " + want + ", got " + got);
}

template <typename T>
T load_element(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of a scalar array as int64 (uint64 beyond int64: false).
bool integer_element(const GgufValue& a, uint64_t i, int64_t& out) {
  const uint8_t* p = a.elements + i * scalar_size(a.element_type);
  switch (a.element_type) {
    case GgufValueType::uint8:
      out = load_element<uint8_t>(p);
      return true;
    case GgufValueType::int8:
      out = load_element<int8_t>(p);
      return true;
    case GgufValueType::uint16:
      out = load_element<uint16_t>(p);
      return true;
    case GgufValueType::int16:
      out = load_element<int16_t>(p);
      return true;
    case GgufValueType::uint32:
      out = load_element<uint32_t>(p);
      return true;
    case GgufValueType::int32:
      out = load_element<int32_t>(p);
      return true;
    case GgufValueType::int64:
      out = load_element<int64_t>(p);
      return true;
    case GgufValueType::uint64: {
      const uint64_t u = load_element<uint64_t>(p);
      out = static_cast<int64_t>(u);
      return u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    default:
      return false;
  }
}

}  // namespace

Expected<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (!v->is_integer()) return wrong_type(path_, key, "an integer", *v);
  if (v->type == GgufValueType::uint64 && v->integer < 0)
    return invalid_argument(path_ + ": metadata \"" + std::string(key) + "\" (" +
                            std::to_string(v->uinteger) + ") is out of range");
  return v->integer;
}

Expected<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->is_float()) return v->real;
  if (v->is_integer())
    return v->type == GgufValueType::uint64 ? static_cast<double>(v->uinteger)
                                            : static_cast<double>(v->integer);
  return wrong_type(path_, key, "a number", *v);
}

Expected<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->type != GgufValueType::boolean) return wrong_type(path_, key, "a bool", *v);
  return v->integer != 0;
}

Expected<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->type != GgufValueType::string) return wrong_type(path_, key, "a string", *v);
  return std::string(v->string);
}

Expected<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->type != GgufValueType::array || v->element_type != GgufValueType::string)
    return wrong_type(path_, key, "an array of strings", *v);
  return v->strings;
}

Expected<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->type != GgufValueType::array ||
      (v->element_type != GgufValueType::float32 && v->element_type != GgufValueType::float64))
    return wrong_type(path_, key, "an array of floats", *v);
  std::vector<float> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    out[i] = v->element_type == GgufValueType::float32
                 ? load_element<float>(v->elements + 4 * i)
                 : static_cast<float>(load_element<double>(v->elements + 8 * i));
  }
  return out;
}

Expected<std::vector<int32_t>> GgufFile::get_int32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(path_, key);
  if (v->type != GgufValueType::array || scalar_size(v->element_type) == 0 ||
      v->element_type == GgufValueType::float32 || v->element_type == GgufValueType::float64 ||
      v->element_type == GgufValueType::boolean)
    return wrong_type(path_, key, "an array of integers", *v);
  std::vector<int32_t> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    int64_t e = 0;
    if (!integer_element(*v, i, e) || e < std::numeric_limits<int32_t>::min() ||
        e > std::numeric_limits<int32_t>::max())
      return invalid_argument(path_ + ": metadata \"" + std::string(key) + "\"[" + std::to_string(i) +
                              "] is out of the int32 range");
    out[i] = static_cast<int32_t>(e);
  }
  return out;
}

}  // namespace tandem::model
