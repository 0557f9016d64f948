#include "grammar/json_schema.h"

#include <cmath>
#include <optional>
#include <set>

namespace tandem::grammar {
namespace {

using nlohmann::ordered_json;

constexpr int kMaxDepth = 64;

const char* kBuiltins[][2] = {
    {"ws", R"(( " " | "\n" [ \t]{0,20} )?)"},
    {"json-char", R"([^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))"},
    {"json-char-plain", R"([^"\\\x00-\x1f] | "\\\"" | "\\\\")"},
    {"json-string", R"("\"" json-char* "\"")"},
    {"json-integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))"},
    {"json-number", R"(json-integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?)"},
    {"json-boolean", R"("true" | "false")"},
    {"json-null", R"("null")"},
    {"json-value", R"(json-object | json-array | json-string | json-number | json-boolean | json-null)"},
    {"json-member", R"(json-string ws ":" ws json-value)"},
    {"json-object", R"("{" ws ( json-member ( ws "," ws json-member )* )? ws "}")"},
    {"json-array", R"("[" ws ( json-value ( ws "," ws json-value )* )? ws "]")"},
    {"json-date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
    {"json-time",
     R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
    {"json-uuid",
     R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
    {"json-email", R"([A-Za-z0-9._%+-]{1,64} "@" json-hostname)"},
    {"json-hostname", R"([A-Za-z0-9] [A-Za-z0-9-]{0,62} ( "." [A-Za-z0-9] [A-Za-z0-9-]{0,62} ){0,7})"},
    {"json-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])"},
    {"json-ipv4", R"(json-octet "." json-octet "." json-octet "." json-octet)"},
    {"json-uri", R"([a-zA-Z] [a-zA-Z0-9+.-]{0,15} ":" [A-Za-z0-9._~:/?#@!$&'()*+,;=%\[\]-]{1,512})"},
};

const std::set<std::string> kIgnored = {"$schema", "$id",      "$comment",   "title",    "description",
                                        "default", "examples", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string> kHandled = {"type",
                                        "pattern",
                                        "enum",
                                        "const",
                                        "anyOf",
                                        "oneOf",
                                        "allOf",
                                        "$ref",
                                        "$defs",
                                        "definitions",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "minItems",
                                        "maxItems",
                                        "minLength",
                                        "maxLength",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum"};

struct SchemaFail {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw SchemaFail{message}; }

std::string sanitize(const std::string& hint) {
  std::string out;
  for (char c : hint) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  if (out.empty()) out = "schema";
  return out.substr(0, 40);
}

std::string repetition(int lo, int hi) {  // hi < 0: unbounded
  if (hi < 0) return lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}";
  if (lo == hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

}  // namespace

std::string gbnf_literal(const std::string& bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct SchemaVisitor {
  SchemaConverter& out;
  const ordered_json& document;
  std::string prefix;
  std::map<std::string, std::string> refs;  // $ref -> rule name

  std::string new_rule(const std::string& hint, const std::string& body) {
    std::string name = prefix + sanitize(hint) + "-" + std::to_string(out.counter_++);
    out.rules_[name] = body;
    return name;
  }

  int bound(const ordered_json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return -1;
    const auto& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 5000)
      fail("'" + std::string(key) + "' at " + path + " must be an integer between 0 and 5000");
    return static_cast<int>(v.get<int64_t>());
  }

  std::string literal_of(const ordered_json& value) {
    return gbnf_literal(value.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
  }

  std::string visit(const ordered_json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail("the schema nests deeper than " + std::to_string(kMaxDepth) + " at " + path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("the schema 'false' at " + path + " accepts nothing");
      return "json-value";
    }
    if (!s.is_object()) fail("the schema at " + path + " must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (!kIgnored.count(key) && !kHandled.count(key))
        fail("unsupported JSON Schema keyword '" + key + "' at " + path);
    }
    if (s.contains("$ref")) return visit_ref(s["$ref"], path, depth);
    if (s.contains("const")) return literal_of(s["const"]);
    if (s.contains("enum")) {
      const auto& e = s["enum"];
      if (!e.is_array() || e.empty()) fail("'enum' at " + path + " must be a non-empty array");
      std::string body;
      for (const auto& v : e) body += (body.empty() ? "" : " | ") + literal_of(v);
      return new_rule("enum", body);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const auto& alts = s[key];
      if (!alts.is_array() || alts.empty())
        fail("'" + std::string(key) + "' at " + path + " must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i)
        body += (i ? " | " : "") + visit(alts[i], path + "/" + key + "/" + std::to_string(i), depth + 1);
      return new_rule(key, body);
    }
    if (s.contains("allOf")) {
      const auto& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        fail("'allOf' at " + path + " is supported with exactly one schema");
      return visit(all[0], path + "/allOf/0", depth + 1);
    }
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties")) return visit_object(s, path, depth);
      if (s.contains("items")) return visit_array(s, path, depth);
      return "json-value";
    }
    const auto& type = s["type"];
    if (type.is_string()) return visit_typed(s, type.get<std::string>(), path, depth);
    if (!type.is_array() || type.empty())
      fail("'type' at " + path + " must be a string or a non-empty array");
    std::string body;
    for (const auto& t : type) {
      if (!t.is_string()) fail("'type' at " + path + " must list type names");
      body += (body.empty() ? "" : " | ") + visit_typed(s, t.get<std::string>(), path, depth);
    }
    return new_rule("types", body);
  }

  std::string visit_ref(const ordered_json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) fail("'$ref' at " + path + " must be a string");
    const std::string r = ref.get<std::string>();
    if (auto it = refs.find(r); it != refs.end()) return it->second;
    if (r.empty() || r[0] != '#')
      fail("'$ref' '" + r + "' at " + path + ": only local references (#...) are supported");
    const ordered_json* target = nullptr;
    try {
      target = &document.at(ordered_json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      fail("'$ref' '" + r + "' at " + path + " does not resolve");
    }
    std::string name =
        prefix + "ref-" + sanitize(r.substr(r.rfind('/') + 1)) + "-" + std::to_string(out.counter_++);
    refs[r] = name;
    out.rules_[name] = "json-null";  // placeholder while the target compiles (recursion)
    out.rules_[name] = visit(*target, r, depth + 1);
    return name;
  }

  std::string visit_typed(const ordered_json& s, const std::string& type, const std::string& path,
                          int depth) {
    if (type == "object") return visit_object(s, path, depth);
    if (type == "array") return visit_array(s, path, depth);
    if (type == "string") return visit_string(s, path);
    if (type == "boolean") return "json-boolean";
    if (type == "null") return "json-null";
    if (type == "integer") return visit_integer(s, path);
    if (type == "number") {
      for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(key))
          fail("unsupported JSON Schema keyword '" + std::string(key) + "' at " + path +
               " (ranges are supported on integers)");
      return "json-number";
    }
    fail("unknown type '" + type + "' at " + path);
  }

  // Integer ranges: both bounds within 2000 of each other, or one bound in
  // [-1000, 1000]; the values near the bound are listed, the rest by length.
  std::string visit_integer(const ordered_json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    std::string keyword;
    auto read = [&](const char* key, bool lower, bool exclusive) {
      if (!s.contains(key)) return;
      keyword = key;
      const auto& v = s[key];
      if (!v.is_number() || std::fabs(v.get<double>()) > 1e15)
        fail("'" + std::string(key) + "' at " + path + " must be a number of at most 15 digits");
      const double d = v.get<double>();
      const auto bound = static_cast<int64_t>(lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                                                    : (exclusive ? std::ceil(d) - 1 : std::floor(d)));
      auto& slot = lower ? lo : hi;
      slot = slot ? (lower ? std::max(*slot, bound) : std::min(*slot, bound)) : bound;
    };
    read("minimum", true, false);
    read("exclusiveMinimum", true, true);
    read("maximum", false, false);
    read("exclusiveMaximum", false, true);
    if (!lo && !hi) return "json-integer";
    auto list = [](int64_t a, int64_t b) {
      std::string body;
      for (int64_t v = a; v <= b; ++v) body += (body.empty() ? "" : " | ") + gbnf_literal(std::to_string(v));
      return body;
    };
    if (lo && hi) {
      if (*hi < *lo) fail("the integer range at " + path + " is empty");
      if (*hi - *lo <= 2000) return new_rule("range", list(*lo, *hi));
    } else if (lo && *lo >= -1000 && *lo <= 1000) {
      const std::string listed = *lo <= 999 ? list(*lo, 999) + " | " : "";
      return new_rule("range", listed + R"([1-9] [0-9]{3,15})");
    } else if (hi && *hi >= -1000 && *hi <= 1000) {
      const std::string listed = *hi >= -999 ? list(-999, *hi) + " | " : "";
      return new_rule("range", listed + R"("-" [1-9] [0-9]{3,15})");
    }
    fail("unsupported JSON Schema keyword '" + keyword + "' at " + path +
         " (integer ranges need both bounds within 2000 of each other, or one bound between -1000 and 1000)");
  }

  std::string visit_string(const ordered_json& s, const std::string& path) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail("'pattern' at " + path + " must be a string");
      for (const char* key : {"minLength", "maxLength", "format"})
        if (s.contains(key))
          fail("unsupported JSON Schema keyword '" + std::string(key) + "' at " + path +
               " together with 'pattern'");
      auto expr = pattern_to_gbnf(s["pattern"].get<std::string>());
      if (!expr.ok()) fail("unsupported 'pattern' at " + path + ": " + expr.status().message());
      return new_rule("pattern", "\"\\\"\" " + *expr + " \"\\\"\"");
    }
    if (s.contains("format")) {
      const auto& f = s["format"];
      const std::string format = f.is_string() ? f.get<std::string>() : "";
      if (format == "date") return new_rule("date", R"("\"" json-date "\"")");
      if (format == "time") return new_rule("time", R"("\"" json-time "\"")");
      if (format == "date-time") return new_rule("date-time", R"("\"" json-date "T" json-time "\"")");
      if (format == "uuid") return new_rule("uuid", R"("\"" json-uuid "\"")");
      if (format == "email") return new_rule("email", R"("\"" json-email "\"")");
      if (format == "hostname") return new_rule("hostname", R"("\"" json-hostname "\"")");
      if (format == "ipv4") return new_rule("ipv4", R"("\"" json-ipv4 "\"")");
      if (format == "uri") return new_rule("uri", R"("\"" json-uri "\"")");
      fail("unsupported string format '" + f.dump() + "' at " + path +
           " (supported: date, time, date-time, uuid, email, hostname, ipv4, uri)");
    }
    const int lo = std::max(0, bound(s, "minLength", path));
    const int hi = bound(s, "maxLength", path);
    if (hi >= 0 && hi < lo) fail("'maxLength' at " + path + " is below 'minLength'");
    if (lo == 0 && hi < 0) return "json-string";
    return new_rule("string", "\"\\\"\" json-char" + repetition(lo, hi) + " \"\\\"\"");
  }

  std::string visit_array(const ordered_json& s, const std::string& path, int depth) {
    std::string item = "json-value";
    if (s.contains("items")) {
      if (s["items"].is_array()) fail("unsupported JSON Schema keyword 'items' as an array at " + path);
      item = visit(s["items"], path + "/items", depth + 1);
    }
    const int lo = std::max(0, bound(s, "minItems", path));
    const int hi = bound(s, "maxItems", path);
    if (hi >= 0 && hi < lo) fail("'maxItems' at " + path + " is below 'minItems'");
    if (hi == 0) return new_rule("array", R"("[" ws "]")");
    const std::string more = "( ws \",\" ws " + item + " )";
    std::string body;
    if (lo == 0) {
      body = "( " + item + " " + more + repetition(0, hi < 0 ? -1 : hi - 1) + " )?";
    } else {
      body = item + " " + more + repetition(lo - 1, hi < 0 ? -1 : hi - 1);
    }
    return new_rule("array", "\"[\" ws " + body + " ws \"]\"");
  }

  std::string visit_object(const ordered_json& s, const std::string& path, int depth) {
    const bool has_props = s.contains("properties");
    if (has_props && !s["properties"].is_object()) fail("'properties' at " + path + " must be an object");
    std::string extra;  // the value rule of additional properties; empty: none allowed
    if (s.contains("additionalProperties")) {
      const auto& ap = s["additionalProperties"];
      if (ap.is_boolean()) {
        if (ap.get<bool>()) extra = "json-value";
      } else {
        extra = visit(ap, path + "/additionalProperties", depth + 1);
      }
    } else if (!has_props || s["properties"].empty()) {
      extra = "json-value";
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("'required' at " + path + " must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail("'required' at " + path + " must be an array of names");
        if (!has_props || !s["properties"].contains(r.get<std::string>()))
          fail("required property '" + r.get<std::string>() + "' at " + path + " is not in 'properties'");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, bool>> members;  // rule, required
    if (has_props) {
      for (const auto& [key, sub] : s["properties"].items()) {
        const std::string value = visit(sub, path + "/properties/" + key, depth + 1);
        members.emplace_back(
            new_rule("kv-" + key, gbnf_literal(ordered_json(key).dump()) + " ws \":\" ws " + value),
            required.count(key) > 0);
      }
    }
    const std::string extra_kv =
        extra.empty() ? "" : new_rule("extra-kv", "json-string ws \":\" ws " + extra);
    // first_i: members i.. with nothing emitted yet; rest_i: after something was.
    const size_t n = members.size();
    std::string first = extra.empty() ? "\"\"" : "( " + extra_kv + " ( ws \",\" ws " + extra_kv + " )* )?";
    std::string rest = extra.empty() ? "\"\"" : "( ws \",\" ws " + extra_kv + " )*";
    std::string first_rule = new_rule("first", first), rest_rule = new_rule("rest", rest);
    for (size_t i = n; i-- > 0;) {
      const auto& [kv, req] = members[i];
      std::string f = kv + " " + rest_rule, r = "ws \",\" ws " + kv + " " + rest_rule;
      if (!req) {
        f += " | " + first_rule;
        r += " | " + rest_rule;
      }
      const std::string nf = new_rule("first", f), nr = new_rule("rest", r);
      first_rule = nf;
      rest_rule = nr;
    }
    return new_rule("object", "\"{\" ws " + first_rule + " ws \"}\"");
  }
};

SchemaConverter::SchemaConverter() {
  for (const auto& b : kBuiltins) rules_[b[0]] = b[1];
}

void SchemaConverter::add_rule(const std::string& name, const std::string& body) { rules_[name] = body; }

Expected<std::string> SchemaConverter::add(const ordered_json& schema, const std::string& name_hint) {
  SchemaVisitor v{*this, schema, sanitize(name_hint) + "-", {}};
  try {
    std::string expr = v.visit(schema, "#", 0);
    return v.new_rule("schema", expr);
  } catch (const SchemaFail& e) {
    return invalid_argument(e.message);
  }
}

std::string SchemaConverter::gbnf() const {
  std::string text;
  for (const auto& [name, body] : rules_) text += name + " ::= " + body + "\n";
  return text;
}

Expected<std::string> json_schema_to_gbnf(const ordered_json& schema) {
  SchemaConverter c;
  TANDEM_ASSIGN_OR_RETURN(std::string rule, c.add(schema, "root"));
  c.add_rule("root", rule);
  return c.gbnf();
}

std::string json_object_gbnf() {
  SchemaConverter c;
  c.add_rule("root", "json-object");
  return c.gbnf();
}

}  // namespace tandem::grammar
