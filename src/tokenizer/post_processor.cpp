#include "post_processor.h"

#include <nlohmann/json.hpp>

namespace tandem::tok {

namespace {

Status parse_template(const nlohmann::json& j, const std::string& where, PostProcessor& out) {
  const auto& single = j.contains("single") ? j["single"] : nlohmann::json();
  if (!single.is_array()) return invalid_argument(where + ".single: expected an array");
  const auto& specials = j.contains("special_tokens") ? j["special_tokens"] : nlohmann::json::object();
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const auto& piece = single[i];
    std::string w = where + ".single[" + std::to_string(i) + "]";
    if (piece.contains("Sequence")) {
      if (seen_sequence) return invalid_argument(w + ": more than one Sequence in a single template");
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id"))
      return invalid_argument(w + ": expected {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}");
    std::string name = piece["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
      return invalid_argument(w + ": special token '" + name + "' missing from " + where + ".special_tokens");
    auto& dst = seen_sequence ? out.suffix : out.prefix;
    for (const auto& id : specials[name]["ids"]) dst.push_back(id.get<int32_t>());
  }
  return Status::Ok();
}

Status parse_cls_sep(const nlohmann::json& j, const std::string& where, PostProcessor& out) {
  for (const char* k : {"cls", "sep"}) {
    if (!j.contains(k) || !j[k].is_array() || j[k].size() != 2 || !j[k][1].is_number_integer())
      return invalid_argument(where + "." + k + ": expected [token, id]");
  }
  out.prefix.push_back(j["cls"][1].get<int32_t>());
  out.suffix.push_back(j["sep"][1].get<int32_t>());
  return Status::Ok();
}

}  // namespace

Expected<PostProcessor> make_post_processor(const nlohmann::json& j, const std::string& where,
                                            const TokenLookup& lookup) {
  PostProcessor out;
  if (j.is_null()) return out;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument(where + ": expected an object with a string \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return out;
  if (type == "TemplateProcessing") {
    TANDEM_RETURN_IF_ERROR(parse_template(j, where, out));
    return out;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    TANDEM_RETURN_IF_ERROR(parse_cls_sep(j, where, out));
    return out;
  }
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      return invalid_argument(where + ".processors: missing or not an array");
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      auto p =
          make_post_processor(j["processors"][i], where + ".processors[" + std::to_string(i) + "]", lookup);
      if (!p.ok()) return p.status();
      // Each processor wraps what the previous ones produced.
      out.prefix.insert(out.prefix.begin(), p->prefix.begin(), p->prefix.end());
      out.suffix.insert(out.suffix.end(), p->suffix.begin(), p->suffix.end());
    }
    return out;
  }
  return unimplemented(where + ": post-processor type '" + type + "' is not supported");
}

}  // namespace tandem::tok
