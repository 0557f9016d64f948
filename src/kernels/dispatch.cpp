// dispatch.cpp — ISA selection, the matmul policy state, and the table lookup.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/env.h"
#include "kernel_table.h"

namespace tandem::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return cpu_features().has_avx2_level();
    case Isa::avx512:
      return cpu_features().has_avx512_level();
  }
  return false;
}

Isa best_supported_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa isa_limit_from_env(const char* value, Isa best) {
  if (value == nullptr) return best;
  const std::string text = to_lower(trim(value));
  Isa wanted;
  if (text == "scalar" || text == "reference") {
    wanted = Isa::scalar;
  } else if (text == "avx2") {
    wanted = Isa::avx2;
  } else if (text == "avx512") {
    wanted = Isa::avx512;
  } else {
    if (!text.empty()) std::fprintf(stderr, "tandem: ignoring unrecognised TANDEM_KERNELS=%s\n", value);
    return best;
  }
  return static_cast<uint8_t>(wanted) < static_cast<uint8_t>(best) ? wanted : best;
}

namespace {
// Unset (0xff) until select_isa(): then the selected ISA.
std::atomic<uint8_t> g_isa{0xff};
}  // namespace

Isa active_isa() {
  const uint8_t v = g_isa.load(std::memory_order_relaxed);
  return v == 0xff ? best_supported_isa() : static_cast<Isa>(v);
}

void select_isa(Isa limit) {
  const Isa best = best_supported_isa();
  const Isa isa = static_cast<uint8_t>(limit) < static_cast<uint8_t>(best) ? limit : best;
  g_isa.store(static_cast<uint8_t>(isa), std::memory_order_relaxed);
}

const KernelTable& kernels_for(Isa isa) {
  TANDEM_CHECK(isa_supported(isa));
  switch (isa) {
    case Isa::avx512:
      return avx512_kernels();
    case Isa::avx2:
      return avx2_kernels();
    case Isa::scalar:
      break;
  }
  return reference_kernels();
}

// ---------------------------------------------------------------- gemm mode
const char* gemm_mode_name(GemmMode mode) { return mode == GemmMode::splitk ? "splitk" : "invariant"; }

bool parse_gemm_mode(const char* text, GemmMode* mode) {
  if (text == nullptr) return false;
  const std::string t = to_lower(trim(text));
  if (t == "invariant") {
    *mode = GemmMode::invariant;
  } else if (t == "splitk") {
    *mode = GemmMode::splitk;
  } else {
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- activations
const char* activations_name(Activations a) { return a == Activations::bf16 ? "bf16" : "f32"; }

namespace {
std::atomic<uint8_t> g_activations{static_cast<uint8_t>(Activations::f32)};
}  // namespace

Activations active_activations() {
  return static_cast<Activations>(g_activations.load(std::memory_order_relaxed));
}

void select_activations(Activations a) {
  g_activations.store(static_cast<uint8_t>(a), std::memory_order_relaxed);
}

bool bf16_activations_native() { return active_isa() == Isa::avx512 && cpu_features().avx512bf16; }

bool parse_activations(const char* text, Activations* a) {
  if (text == nullptr) return false;
  const std::string t = to_lower(trim(text));
  if (t == "f32") {
    *a = Activations::f32;
  } else if (t == "bf16") {
    *a = Activations::bf16;
  } else {
    return false;
  }
  return true;
}

}  // namespace tandem::kernels
