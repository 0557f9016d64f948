#include "gpu_knobs.h"

#include <cstdlib>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "core/env.h"

namespace tandem::app {
namespace {

// Mirrors of src/kernels/cuda, which only a CUDA build compiles (mirrored
// rather than moved to a shared header so that the kernels keep their
// constants beside the code they size; tests/app/environment_test.cpp
// RangesMatchTheCudaSources reads those sources and fails when they drift).
// Keep in step with:
//   gemm.cu kSmallTileVariants, small_tile_variant_retired (ADR 0056) and
//     read_by_shape's bound on E (24 <= E < 40);
//   gemm.cu kLargeTileVariants and kWideModes;
//   gemm.cu kMaxSlices (gemm_slicing's cap, TANDEM_CUDA_SLICE_PLAN's S);
//   attention.cu environment_shape (serial, split, kvsplit, tile) and
//     kv_split_min_rows (0..65535).
constexpr int64_t kSmallTileVariants = 23;
constexpr int64_t kMaxSlices = 16;
constexpr int64_t kLargeTileVariants = 18;
constexpr int64_t kWideModes = 5;
constexpr int64_t kByShapeLog2Min = 24, kByShapeLog2Max = 39;
bool small_tile_retired(int64_t v) { return v == 9 || (v >= 12 && v <= 14) || v == 16 || v == 17; }

constexpr const char* kSmallTileAccepted =
    "accepted: 0..22 (9, 12-14, 16, 17 are retired and mean the default), or W,L,S[,E] / L,S "
    "(picks 0..22, none retired; E 24..39)";

enum class Kind { boolean, integer, choice, small_tile, slice_plan };

struct Knob {
  const char* name;
  Kind kind;
  int64_t lo, hi;                    // integer
  std::vector<std::string> choices;  // choice
};
Knob boolean(const char* name) { return {name, Kind::boolean, 0, 0, {}}; }
Knob integer(const char* name, int64_t lo, int64_t hi) { return {name, Kind::integer, lo, hi, {}}; }
Knob choice(const char* name, std::vector<std::string> choices) {
  return {name, Kind::choice, 0, 0, std::move(choices)};
}

// docs/environment.md's order. Readers: quant_gemm.cu (QUANT_FUSED_ROWS, QUANT_STREAM), gemm.cu
// (SMALL/LARGE/WIDE_TILE, TILE_SLICES), runtime.cpp (PDL), fused.cu (ROW_NORM, NORM_CLUSTER), attention.cu,
// model/cuda_forward.cpp (FUSE*, GRAPH_STRIDE, DEVICE_PICK, GRAPH_PICK), model/device.cpp
// (ACTIVATIONS), model/device_weights.cpp (UPLOAD*), app (CHUNK_ROWS),
// model/step_timing.h and scheduler/engine.cpp (STEP_TIMING).
const std::vector<Knob>& knobs() {
  static const std::vector<Knob> k = {
      integer("TANDEM_CUDA_QUANT_FUSED_ROWS", 0, 8),  // quant_gemm.cu quant_fused_max_rows (ADR 0077)
      integer("TANDEM_CUDA_QUANT_STREAM", 0, 2),      // quant_gemm.cu quant_stream_for (ADR 0078)
      {"TANDEM_CUDA_SMALL_TILE", Kind::small_tile, 0, 0, {}},
      boolean("TANDEM_CUDA_FUSE"),
      boolean("TANDEM_CUDA_FUSE_NORM"),
      boolean("TANDEM_CUDA_FUSE_LAUNCHES"),
      boolean("TANDEM_CUDA_DEVICE_PICK"),
      boolean("TANDEM_CUDA_GRAPH_PICK"),
      boolean("TANDEM_CUDA_PICKS_TO_HOST"),
      boolean("TANDEM_CUDA_CHAIN"),
      boolean("TANDEM_CUDA_STAGE_INPUTS"),
      boolean("TANDEM_CUDA_FUSE_ROPE"),
      integer("TANDEM_CUDA_FUSE_ROPE_ROWS", 0, 16),
      integer("TANDEM_CUDA_NORM_EPILOGUE_ROWS", 0, 8),
      boolean("TANDEM_CUDA_ATTN_PRESTAGE"),
      integer("TANDEM_CUDA_SLICE_BLOCKS", 32, 4096),
      choice("TANDEM_CUDA_SLICE_MIN", {"64", "128", "256", "512"}),
      choice("TANDEM_CUDA_SLICED_OVER", {"3", "8"}),
      {"TANDEM_CUDA_SLICE_PLAN", Kind::slice_plan, 0, 0, {}},  // gemm.cu planned_slices
      choice("TANDEM_CUDA_MID_TILE", {"4", "5", "10", "11", "15", "18", "19", "20"}),
      boolean("TANDEM_CUDA_PDL"),
      choice("TANDEM_CUDA_ATTENTION", {"serial", "split", "kvsplit", "tile"}),
      integer("TANDEM_CUDA_KV_SPLIT_ROWS", 0, 65535),  // attention.cu kv_split_min_rows (ADR 0087)
      integer("TANDEM_CUDA_LARGE_TILE", 0, kLargeTileVariants - 1),
      boolean("TANDEM_CUDA_TILE_SLICES"),
      integer("TANDEM_CUDA_WIDE_TILE", 0, kWideModes - 1),
      boolean("TANDEM_CUDA_ROW_NORM"),
      boolean("TANDEM_CUDA_NORM_CLUSTER"),
      // serve clamps it to 256..4096 (engine_forward_rows); generate and bench take it as is.
      integer("TANDEM_CUDA_CHUNK_ROWS", 1, 65536),
      choice("TANDEM_CUDA_ACTIVATIONS", {"bf16", "f32"}),
      choice("TANDEM_CUDA_GRAPH_STRIDE", {"bucketed", "pool"}),
      choice("TANDEM_CUDA_UPLOAD", {"pinned", "pageable"}),
      integer("TANDEM_CUDA_UPLOAD_CHUNK_MIB", 1, 4096),
      boolean("TANDEM_STEP_TIMING"),
  };
  return k;
}

// One pick of TANDEM_CUDA_SMALL_TILE's by-shape list (or its E), checked.
std::optional<int64_t> small_tile_field(const std::string& text, bool exponent) {
  const auto v = parse_int(text);
  if (!v) return std::nullopt;
  if (exponent) return *v >= kByShapeLog2Min && *v <= kByShapeLog2Max ? v : std::nullopt;
  return *v >= 0 && *v < kSmallTileVariants && !small_tile_retired(*v) ? v : std::nullopt;
}

// A variant 0..20 (a retired one is kept: the kernels take it as the
// default), or the by-shape list W,L,S[,E] / L,S (gemm.cu read_by_shape,
// which ignores a whole list with a retired or out-of-range pick, so such a
// list is refused here rather than silently dropped).
Expected<std::string> canonical_small_tile(const std::string& name, const std::string& value) {
  const std::string refused = name + "='" + value + "' is not a small-tile variant; " + kSmallTileAccepted;
  const std::string t = trim(value);
  if (t.find(',') == std::string::npos) {
    const auto v = parse_int(t);
    if (!v || *v < 0 || *v >= kSmallTileVariants) return invalid_argument(refused);
    return std::to_string(*v);
  }
  std::vector<std::string> parts;
  std::stringstream in(t);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  if (t.back() == ',' || parts.size() < 2 || parts.size() > 4) return invalid_argument(refused);
  std::string canonical;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto v = small_tile_field(parts[i], i == 3);
    if (!v) return invalid_argument(refused);
    canonical += (i == 0 ? "" : ",") + std::to_string(*v);
  }
  return canonical;
}

// N:K:S[,N:K:S...] with N, K >= 1 and S 1..kMaxSlices (gemm.cu planned_slices,
// which ignores a malformed plan and caps S, so both are refused here).
Expected<std::string> canonical_slice_plan(const std::string& name, const std::string& value) {
  const std::optional<std::vector<int64_t>> v = parse_int_list(value, ":,");
  bool ok = v && v->size() % 3 == 0;
  std::string canonical;
  for (size_t i = 0; ok && i < v->size(); i += 3) {
    ok = (*v)[i] >= 1 && (*v)[i + 1] >= 1 && (*v)[i + 2] >= 1 && (*v)[i + 2] <= kMaxSlices;
    canonical += (i == 0 ? "" : ",") + std::to_string((*v)[i]) + ":" + std::to_string((*v)[i + 1]) + ":" +
                 std::to_string((*v)[i + 2]);
  }
  if (!ok)
    return invalid_argument(name + "='" + value +
                            "' is not a slice plan; accepted: N:K:S[,N:K:S...] (a matrix's n, k >= 1 and its "
                            "slices S, 1..16)");
  return canonical;
}

Expected<std::string> canonical_value(const Knob& knob, const std::string& value) {
  switch (knob.kind) {
    case Kind::boolean:
      TANDEM_RETURN_IF_ERROR(check_bool_value(knob.name, value));
      return std::string(*parse_bool(value) ? "1" : "0");
    case Kind::integer:
      TANDEM_RETURN_IF_ERROR(check_int_value(knob.name, value, knob.lo, knob.hi));
      return std::to_string(*parse_int(value));
    case Kind::choice:
      TANDEM_RETURN_IF_ERROR(check_choice_value(knob.name, value, knob.choices));
      return to_lower(trim(value));
    case Kind::small_tile:
      return canonical_small_tile(knob.name, value);
    case Kind::slice_plan:
      return canonical_slice_plan(knob.name, value);
  }
  return internal_error("unreachable");
}

}  // namespace

Expected<std::string> canonical_gpu_knob(const std::string& name, const std::string& value) {
  for (const Knob& knob : knobs())
    if (name == knob.name) return canonical_value(knob, value);
  return invalid_argument(name + " is not a GPU knob");
}

const std::vector<std::string>& gpu_knob_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Knob& knob : knobs()) n.emplace_back(knob.name);
    return n;
  }();
  return names;
}

Status validate_gpu_knobs() {
  for (const Knob& knob : knobs()) {
    auto v = env_string(knob.name);
    if (!v) continue;
    if (is_blank(*v)) {  // the default, for every reader (an empty SMALL_TILE once read as variant 0)
      ::unsetenv(knob.name);
      continue;
    }
    auto canonical = canonical_value(knob, *v);
    if (!canonical.ok()) return canonical.status();
    ::setenv(knob.name, canonical->c_str(), 1);  // e.g. PDL=off: its reader only knows "0"
  }
  return Status::Ok();
}

}  // namespace tandem::app
