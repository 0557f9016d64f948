#include "speculative/drafter.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/mapped_file.h"
#include "model/config.h"

namespace tandem::speculative {

const char* draft_kind_name(DraftKind kind) { return kind == DraftKind::mtp ? "mtp" : "draft"; }

Expected<DraftKind> parse_draft_kind(const std::string& text) {
  const std::string v = to_lower(trim(text));
  if (v == "draft") return DraftKind::draft;
  if (v == "mtp") return DraftKind::mtp;
  return invalid_argument("unknown draft kind '" + text + "'; accepted values: draft, mtp");
}

Expected<DraftKind> detect_draft_kind(const std::string& dir) {
  const std::string path = dir + "/config.json";
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json j, model::read_json_file(path));
  return detect_draft_kind(j, path);
}

Expected<DraftKind> detect_draft_kind(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return invalid_argument(path + ": not a JSON object");
  const std::string type = j.value("model_type", std::string());
  // A head directory, or a full checkpoint declaring MTP layers inside (MiMo, DeepSeek-V3).
  const auto nextn = j.find("num_nextn_predict_layers");
  if (type == "tandem_mtp" || (nextn != j.end() && nextn->is_number_integer() && nextn->get<int64_t>() > 0))
    return DraftKind::mtp;
  if (auto cfg = model::parse_config(j.dump(), path); cfg.ok()) return DraftKind::draft;
  return invalid_argument(path + ": cannot tell the drafter kind from model_type '" + type +
                          "' (expected tandem_mtp for an MTP head, or a causal LM: " +
                          model::supported_model_types() + "); pass --draft-kind draft|mtp");
}

}  // namespace tandem::speculative
