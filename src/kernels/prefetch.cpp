// prefetch.cpp — the software prefetch policy per CPU vendor (ADR 0049).
#include "kernels/prefetch.h"

#include <sstream>

#include "core/env.h"

namespace tandem::kernels {
namespace {

PrefetchPolicy& active() {
  static PrefetchPolicy policy = prefetch_policy_for(cpu_features().vendor);
  return policy;
}

}  // namespace

PrefetchPolicy prefetch_policy_for(CpuVendor vendor) {
  PrefetchPolicy p;  // Intel (and unknown vendors): the defaults
  if (vendor == CpuVendor::amd) {
    p.near_bytes = 4096;
    p.far_bytes = 65536;
    p.next_panel = true;
    p.quant_bytes = 2048;
  }
  return p;
}

const PrefetchPolicy& prefetch_policy() { return active(); }

void set_prefetch_policy(const PrefetchPolicy& policy) { active() = policy; }

std::optional<PrefetchPolicy> parse_prefetch_policy(const std::string& text, PrefetchPolicy base) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (is_blank(item)) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    std::string key = item.substr(0, eq);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::optional<int64_t> value = parse_int(item.substr(eq + 1));
    if (!value || *value < 0) return std::nullopt;
    if (key == "near") {
      base.near_bytes = *value;
    } else if (key == "far") {
      base.far_bytes = *value;
    } else if (key == "quant") {
      base.quant_bytes = *value;
    } else if (key == "next" && *value <= 1) {
      base.next_panel = *value == 1;
    } else {
      return std::nullopt;
    }
  }
  return base;
}

std::string describe(const PrefetchPolicy& p) {
  return "near=" + std::to_string(p.near_bytes) + ",far=" + std::to_string(p.far_bytes) +
         ",next=" + (p.next_panel ? "1" : "0") + ",quant=" + std::to_string(p.quant_bytes);
}

}  // namespace tandem::kernels
