// Internal to the model library: the config.json field reader config.cpp
// and config_gemma4.cpp share. Errors are Status values naming the file and
// the field.
#pragma once

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "model/config.h"

namespace tandem::model::internal {

using json = nlohmann::json;

namespace limits {
// Upper bounds, generous next to published checkpoints (the largest vocabularies
// are ~260k, hidden sizes ~16k, intermediate ~100k, 128 layers, 128 heads,
// head_dim 512 (Gemma 4's full-attention layers), contexts 10M), so that no config value makes the loader or
// the KV cache size anything absurd or overflow an int.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = int64_t{1} << 16;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 512;  // the attention kernels' limit (kernels' kMaxHeadDim)
constexpr int64_t kMaxExperts = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 30;
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();
constexpr double kMaxRopeTheta = 1e12;
constexpr double kMaxRopeFactor = 1e6;
}  // namespace limits

// Reads config fields with errors that name the file and the field.
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  static std::string type_name(const json& v) {
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return v.is_object() ? "an object" : "null";
  }
  Status error(const std::string& field, const std::string& what) const {
    return invalid_argument(path_ + ": field \"" + field + "\" " + what);
  }
  bool has(const char* field) const { return j_.contains(field) && !j_[field].is_null(); }

  // An integer in [min_value, max_value]; absent (or null) leaves `out` as is.
  Status get_int(const char* field, int64_t& out, bool required, int64_t min_value = 1,
                 int64_t max_value = std::numeric_limits<int32_t>::max()) const {
    if (!has(field)) return required ? error(field, "is missing") : Status::Ok();
    const json& v = j_[field];
    if (!v.is_number_integer()) return error(field, "must be an integer, got " + type_name(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max_value))
      return error(field, "(" + v.dump() + ") must be at most " + std::to_string(max_value));
    out = v.get<int64_t>();
    if (out < min_value)
      return error(field, "(" + std::to_string(out) + ") must be >= " + std::to_string(min_value));
    if (out > max_value)
      return error(field, "(" + std::to_string(out) + ") must be at most " + std::to_string(max_value));
    return Status::Ok();
  }
  // A finite number in (min_exclusive, max_value]; absent (or null) leaves `out` as is.
  // `name` is the field as the error shows it (e.g. "rope_scaling.factor").
  Status get_double(const json& obj, const std::string& field, const std::string& name, double& out,
                    double min_exclusive = -std::numeric_limits<double>::infinity(),
                    double max_value = std::numeric_limits<double>::max()) const {
    if (!obj.contains(field) || obj[field].is_null()) return Status::Ok();
    if (!obj[field].is_number()) return error(name, "must be a number, got " + type_name(obj[field]));
    const double v = obj[field].get<double>();
    if (!std::isfinite(v)) return error(name, "must be finite");
    if (!(v > min_exclusive))
      return error(name, "(" + obj[field].dump() + ") must be > " + json(min_exclusive).dump());
    if (v > max_value)
      return error(name, "(" + obj[field].dump() + ") must be at most " + json(max_value).dump());
    out = v;
    return Status::Ok();
  }
  Status get_bool(const char* field, bool& out) const {
    if (!has(field)) return Status::Ok();
    if (!j_[field].is_boolean()) return error(field, "must be true or false");
    out = j_[field].get<bool>();
    return Status::Ok();
  }

  const json& j() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
};

// config_gemma4.cpp: Gemma4TextConfig's defaults for absent fields; the
// gemma4_text specifics (after the shared Gemma fields); a multimodal gemma4
// config read as its text_config.
void fill_gemma4_defaults(json& j);
Status parse_gemma4(const Reader& r, ModelConfig& c);
Expected<ModelConfig> parse_gemma4_multimodal(const json& j, const std::string& path);

}  // namespace tandem::model::internal
