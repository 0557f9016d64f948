#include "model/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace tandem::model {
namespace {

using json = nlohmann::json;

Expected<kernels::DType> parse_dtype(const std::string& s) {
  if (s == "F32") return kernels::DType::f32;
  if (s == "F16") return kernels::DType::f16;
  if (s == "BF16") return kernels::DType::bf16;
  return invalid_argument("unsupported dtype \"" + s + "\" (supported: F32, F16, BF16)");
}

const char* dtype_tag(kernels::DType d) {
  switch (d) {
    case kernels::DType::f32:
      return "F32";
    case kernels::DType::f16:
      return "F16";
    case kernels::DType::bf16:
      return "BF16";
    default:  // never parsed from safetensors
      break;
  }
  return "?";
}

// Parses one header entry into `view` (data pointer relative to `data_base`).
Status parse_entry(const json& entry, const uint8_t* data_base, uint64_t data_size, TensorView& view,
                   uint64_t& begin, uint64_t& end) {
  if (!entry.is_object()) return invalid_argument("entry is not a JSON object");
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return invalid_argument("missing or non-string \"dtype\"");
  if (sh == entry.end() || !sh->is_array()) return invalid_argument("missing or non-array \"shape\"");
  if (off == entry.end() || !off->is_array() || off->size() != 2)
    return invalid_argument("\"data_offsets\" must be an array of two integers");
  TANDEM_ASSIGN_OR_RETURN(view.dtype, parse_dtype(dt->get<std::string>()));
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return invalid_argument("shape has a non-integer or negative dimension");
    uint64_t v = d.get<uint64_t>();
    if (v > (1ull << 40) || (v != 0 && numel > (1ull << 50) / v)) return invalid_argument("shape too large");
    numel *= v;
    view.shape.push_back(static_cast<int64_t>(v));
  }
  for (const auto& o : *off) {
    if (!o.is_number_unsigned()) return invalid_argument("data_offsets are not non-negative integers");
  }
  begin = (*off)[0].get<uint64_t>();
  end = (*off)[1].get<uint64_t>();
  if (begin > end)
    return out_of_range("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] are reversed");
  if (end > data_size)
    return out_of_range("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] run past the data section (" + std::to_string(data_size) +
                        " bytes; file truncated?)");
  uint64_t expected = numel * kernels::dtype_size(view.dtype);
  if (end - begin != expected)
    return invalid_argument("byte length " + std::to_string(end - begin) + " does not match shape " +
                            view.shape_string() + " x " + dtype_tag(view.dtype) + " (" +
                            std::to_string(expected) + " bytes)");
  view.data = data_base + begin;
  view.bytes = static_cast<size_t>(end - begin);
  return Status::Ok();
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  TANDEM_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  f.path_ = path;
  TANDEM_RETURN_IF_ERROR(f.parse_image(f.file_.data(), f.file_.size()));
  return f;
}

Expected<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  TANDEM_RETURN_IF_ERROR(f.parse_image(data, size));
  return f;
}

Status SafetensorsFile::parse_image(const uint8_t* base, uint64_t size) {
  const std::string& path = path_;
  auto fail = [&](const Status& s) { return s.with_context(path); };
  if (size < 8)
    return fail(invalid_argument("file is " + std::to_string(size) + " bytes, too short for a header"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > kMaxHeaderBytes)
    return fail(invalid_argument("header length " + std::to_string(header_len) + " exceeds the " +
                                 std::to_string(kMaxHeaderBytes) + "-byte limit"));
  if (header_len > size - 8)
    return fail(out_of_range("header length " + std::to_string(header_len) + " runs past the end of the " +
                             std::to_string(size) + "-byte file (truncated?)"));
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(base + 8),
                         reinterpret_cast<const char*>(base + 8 + header_len));
  } catch (const json::exception& e) {
    return fail(invalid_argument(std::string("header is not valid JSON: ") + e.what()));
  }
  if (!header.is_object()) return fail(invalid_argument("header is not a JSON object"));
  const uint8_t* data_base = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return fail(invalid_argument("__metadata__ is not an object"));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorView view;
    view.name = it.key();
    view.file = path;
    uint64_t begin = 0, end = 0;
    Status s = parse_entry(*it, data_base, data_size, view, begin, end);
    if (!s.ok()) return fail(s.with_context("tensor \"" + it.key() + "\""));
    auto [pos, inserted] = tensors_.emplace(view.name, std::move(view));
    spans.push_back({begin, end, &pos->first});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end)
      return fail(invalid_argument("tensor \"" + *spans[i].name + "\" overlaps tensor \"" +
                                   *spans[i - 1].name + "\" in the data section"));
  }
  return Status::Ok();
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Expected<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("model directory " + dir + ": no such directory");
  Checkpoint c;
  c.dir_ = dir;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(index_path, ec)) {
    TANDEM_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
    json index;
    try {
      index = json::parse(text);
    } catch (const json::exception& e) {
      return invalid_argument(index_path + ": not valid JSON: " + e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return invalid_argument(index_path + ": missing \"weight_map\" object");
    std::map<std::string, SafetensorsFile*> shards;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it->is_string())
        return invalid_argument(index_path + ": weight_map entry for \"" + it.key() + "\" is not a string");
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
        return invalid_argument(index_path + ": shard name \"" + shard + "\" is not a plain file name");
      if (!shards.count(shard)) {
        TANDEM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open((fs::path(dir) / shard).string()));
        c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
        shards[shard] = c.files_.back().get();
      }
      const TensorView* v = shards[shard]->find(it.key());
      if (v == nullptr)
        return not_found(shards[shard]->path() + ": tensor \"" + it.key() + "\" listed in " + index_path +
                         " is missing");
      c.index_[it.key()] = v;
    }
    return c;
  }
  if (!fs::exists(single_path, ec))
    return not_found("model directory " + dir + ": no model.safetensors or model.safetensors.index.json");
  TANDEM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single_path));
  c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
  for (const auto& [name, view] : c.files_.back()->tensors()) c.index_[name] = &view;
  return c;
}

Checkpoint Checkpoint::from_views(std::string source, std::vector<TensorView> views,
                                  std::shared_ptr<const void> owner, std::function<void()> drop_pages) {
  Checkpoint c;
  c.dir_ = std::move(source);
  c.owner_ = std::move(owner);
  c.drop_pages_ = std::move(drop_pages);
  for (TensorView& v : views) {
    c.views_.push_back(std::make_unique<TensorView>(std::move(v)));
    c.index_[c.views_.back()->name] = c.views_.back().get();
  }
  return c;
}

void Checkpoint::drop_resident_pages() const {
  for (const auto& f : files_) f->drop_resident_pages();
  if (drop_pages_) drop_pages_();
}

const uint8_t* rows_in_hf_order(const TensorView& v, std::vector<uint8_t>& scratch) {
  const int64_t group = v.rope_group_rows;
  if (group == 0) return v.data;
  const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
  TANDEM_CHECK(group % 2 == 0 && rows % group == 0);
  const size_t row_bytes = v.bytes / static_cast<size_t>(rows);
  scratch.resize(v.bytes);
  const int64_t half = group / 2;
  for (int64_t base = 0; base < rows; base += group) {
    for (int64_t i = 0; i < group; ++i) {
      // HF row i of the head is stored at 2i (first half) or 2(i - half) + 1 (second half).
      const int64_t stored = i < half ? 2 * i : 2 * (i - half) + 1;
      std::memcpy(scratch.data() + static_cast<size_t>(base + i) * row_bytes,
                  v.data + static_cast<size_t>(base + stored) * row_bytes, row_bytes);
    }
  }
  return scratch.data();
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Expected<const TensorView*> Checkpoint::get(const std::string& name) const {
  const TensorView* v = find(name);
  if (v == nullptr)
    return not_found((views_.empty() ? "model directory " : "") + dir_ + ": tensor \"" + name +
                     "\" is missing");
  return v;
}

Expected<const TensorView*> Checkpoint::get(const std::string& name,
                                            const std::vector<int64_t>& shape) const {
  TANDEM_ASSIGN_OR_RETURN(const TensorView* v, get(name));
  if (v->shape != shape) {
    TensorView want;
    want.shape = shape;
    return invalid_argument(v->file + ": tensor \"" + name + "\" has shape " + v->shape_string() +
                            ", expected " + want.shape_string() +
                            (views_.empty() ? " from config.json" : " from the GGUF metadata"));
  }
  return v;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, v] : index_) total += v->bytes;
  return total;
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    uint64_t bytes = numel * kernels::dtype_size(t.dtype);
    header[t.name] = {
        {"dtype", dtype_tag(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text += ' ';  // data section 8-byte aligned, as the reference writer
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return io_error(path + ": cannot open for writing: " + std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const auto& t : tensors) {
    if (!ok) break;
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    size_t bytes = numel * kernels::dtype_size(t.dtype);
    ok = std::fwrite(t.data, 1, bytes, f) == bytes;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return io_error(path + ": write failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace tandem::model
