// validate_environment's GPU knobs (TANDEM_CUDA_*, TANDEM_STEP_TIMING;
// docs/environment.md): blank is the default (the variable is removed), a
// value outside what the docs accept is an error naming the variable and the
// value, a good one passes and is rewritten to the spelling every reader
// takes the same way. Runs without a GPU: only the environment is checked.
#include "environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "gpu_knobs.h"
#include "kernels/ops.h"

namespace tandem::app {
namespace {

class GpuKnobsTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const std::string& name : gpu_knob_names()) ::unsetenv(name.c_str());
  }
  // validate_environment with one variable set; its value afterwards in `*after` (nullopt: removed).
  static Status validate_with(const std::string& name, const std::string& value,
                              std::optional<std::string>* after = nullptr) {
    ::setenv(name.c_str(), value.c_str(), 1);
    Status s = validate_environment();
    const char* v = std::getenv(name.c_str());
    if (after != nullptr) *after = v != nullptr ? std::optional<std::string>(v) : std::nullopt;
    ::unsetenv(name.c_str());
    return s;
  }
};

TEST_F(GpuKnobsTest, EveryKnobIsCovered) {
  const std::set<std::string> names(gpu_knob_names().begin(), gpu_knob_names().end());
  for (const char* name :
       {"TANDEM_CUDA_SMALL_TILE",   "TANDEM_CUDA_LARGE_TILE",    "TANDEM_CUDA_WIDE_TILE",
        "TANDEM_CUDA_TILE_SLICES",  "TANDEM_CUDA_PDL",           "TANDEM_CUDA_ROW_NORM",
        "TANDEM_CUDA_FUSE",         "TANDEM_CUDA_FUSE_NORM",     "TANDEM_CUDA_FUSE_LAUNCHES",
        "TANDEM_CUDA_DEVICE_PICK",  "TANDEM_CUDA_GRAPH_PICK",    "TANDEM_CUDA_PICKS_TO_HOST",
        "TANDEM_CUDA_FUSE_ROPE",    "TANDEM_CUDA_ATTN_PRESTAGE", "TANDEM_CUDA_SLICE_BLOCKS",
        "TANDEM_CUDA_SLICE_MIN",    "TANDEM_CUDA_SLICE_PLAN",    "TANDEM_CUDA_ATTENTION",
        "TANDEM_CUDA_GRAPH_STRIDE", "TANDEM_CUDA_UPLOAD",        "TANDEM_CUDA_UPLOAD_CHUNK_MIB",
        "TANDEM_CUDA_CHUNK_ROWS",   "TANDEM_CUDA_ACTIVATIONS",   "TANDEM_STEP_TIMING"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST_F(GpuKnobsTest, BlankIsTheDefault) {
  for (const std::string& name : gpu_knob_names()) {
    for (const char* blank : {"", " ", "\t "}) {
      std::optional<std::string> after;
      EXPECT_TRUE(validate_with(name, blank, &after).ok()) << name;
      EXPECT_FALSE(after.has_value()) << name << "='" << blank << "' must be removed (the default)";
    }
  }
}

TEST_F(GpuKnobsTest, BadValuesAreRefusedNamingTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"TANDEM_CUDA_SMALL_TILE", "abc"},
      {"TANDEM_CUDA_SMALL_TILE", "23"},
      {"TANDEM_CUDA_SMALL_TILE", "-1"},
      {"TANDEM_CUDA_SMALL_TILE", "1.5"},
      {"TANDEM_CUDA_SMALL_TILE", "20x"},
      {"TANDEM_CUDA_SMALL_TILE", "20,9,3"},  // a retired pick: read_by_shape would drop the whole list
      {"TANDEM_CUDA_SMALL_TILE", "20,8,23"},
      {"TANDEM_CUDA_SMALL_TILE", "20,8,3,23"},
      {"TANDEM_CUDA_SMALL_TILE", "20,8,3,40"},
      {"TANDEM_CUDA_SMALL_TILE", "20,8,3,25,1"},
      {"TANDEM_CUDA_SMALL_TILE", "20,8,"},
      {"TANDEM_CUDA_SMALL_TILE", "20,,8"},
      {"TANDEM_CUDA_SMALL_TILE", "x,y"},
      {"TANDEM_CUDA_SLICE_PLAN", "6144:4096"},
      {"TANDEM_CUDA_SLICE_PLAN", "6144:4096:17"},
      {"TANDEM_CUDA_SLICE_PLAN", "6144:4096:0"},
      {"TANDEM_CUDA_SLICE_PLAN", "0:4096:4"},
      {"TANDEM_CUDA_SLICE_PLAN", "6144:4096:4,"},
      {"TANDEM_CUDA_SLICE_PLAN", "qkv:11"},
      {"TANDEM_CUDA_LARGE_TILE", "abc"},
      {"TANDEM_CUDA_LARGE_TILE", "18"},
      {"TANDEM_CUDA_LARGE_TILE", "-1"},
      {"TANDEM_CUDA_WIDE_TILE", "5"},
      {"TANDEM_CUDA_WIDE_TILE", "wide"},
      {"TANDEM_CUDA_TILE_SLICES", "maybe"},
      {"TANDEM_CUDA_PDL", "of"},
      {"TANDEM_CUDA_PDL", "2"},
      {"TANDEM_CUDA_ROW_NORM", "enabled"},
      {"TANDEM_CUDA_FUSE", "yes please"},
      {"TANDEM_CUDA_FUSE_NORM", "-1"},
      {"TANDEM_CUDA_FUSE_LAUNCHES", "2"},
      {"TANDEM_CUDA_DEVICE_PICK", "host"},
      {"TANDEM_CUDA_ATTENTION", "flash"},
      {"TANDEM_CUDA_ATTENTION", "automatic"},
      {"TANDEM_CUDA_GRAPH_STRIDE", "long"},
      {"TANDEM_CUDA_UPLOAD", "mapped"},
      {"TANDEM_CUDA_UPLOAD_CHUNK_MIB", "0"},
      {"TANDEM_CUDA_UPLOAD_CHUNK_MIB", "64M"},
      {"TANDEM_CUDA_CHUNK_ROWS", "0"},
      {"TANDEM_CUDA_CHUNK_ROWS", "many"},
      {"TANDEM_CUDA_ACTIVATIONS", "fp16"},
      {"TANDEM_STEP_TIMING", "2"},
  };
  for (const auto& [name, value] : bad) {
    std::optional<std::string> after;
    const Status s = validate_with(name, value, &after);
    ASSERT_FALSE(s.ok()) << name << "='" << value << "' was accepted";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(std::string(name) + "='" + value + "'"), std::string::npos) << s.message();
    EXPECT_TRUE(s.message().find("accepted: ") != std::string::npos ||
                s.message().find("is not one of: ") != std::string::npos)
        << "must say what is accepted: " << s.message();
  }
}

TEST_F(GpuKnobsTest, GoodValuesPassInTheirCanonicalSpelling) {
  const std::tuple<const char*, const char*, const char*> good[] = {
      {"TANDEM_CUDA_SMALL_TILE", "0", "0"},
      {"TANDEM_CUDA_SMALL_TILE", " 20 ", "20"},
      {"TANDEM_CUDA_SMALL_TILE", "9", "9"},  // retired: accepted, the kernels take the default
      {"TANDEM_CUDA_SMALL_TILE", "20, 8, 3", "20,8,3"},
      {"TANDEM_CUDA_SMALL_TILE", "19,8,3,24", "19,8,3,24"},
      {"TANDEM_CUDA_SMALL_TILE", "15,3", "15,3"},
      {"TANDEM_CUDA_SLICE_PLAN", " 6144:4096:11 ", "6144:4096:11"},
      {"TANDEM_CUDA_SLICE_PLAN", "6144:4096:1,3072,2048,16", "6144:4096:1,3072:2048:16"},
      {"TANDEM_CUDA_LARGE_TILE", "+17", "17"},
      {"TANDEM_CUDA_LARGE_TILE", "0", "0"},
      {"TANDEM_CUDA_WIDE_TILE", "4", "4"},
      {"TANDEM_CUDA_TILE_SLICES", "false", "0"},
      {"TANDEM_CUDA_PDL", "off", "0"},  // its reader only knew "0"
      {"TANDEM_CUDA_PDL", "1", "1"},
      {"TANDEM_CUDA_ROW_NORM", "No", "0"},
      {"TANDEM_CUDA_FUSE", " yes ", "1"},
      {"TANDEM_CUDA_FUSE_NORM", "0", "0"},
      {"TANDEM_CUDA_FUSE_LAUNCHES", "true", "1"},
      {"TANDEM_CUDA_DEVICE_PICK", "off", "0"},
      {"TANDEM_CUDA_ATTENTION", " Split", "split"},
      {"TANDEM_CUDA_ATTENTION", "tile", "tile"},
      {"TANDEM_CUDA_ATTENTION", "serial", "serial"},
      {"TANDEM_CUDA_GRAPH_STRIDE", "pool", "pool"},
      {"TANDEM_CUDA_GRAPH_STRIDE", "bucketed", "bucketed"},
      {"TANDEM_CUDA_UPLOAD", "PAGEABLE", "pageable"},
      {"TANDEM_CUDA_UPLOAD_CHUNK_MIB", "128", "128"},
      {"TANDEM_CUDA_CHUNK_ROWS", "512", "512"},
      {"TANDEM_CUDA_ACTIVATIONS", "F32 ", "f32"},
      {"TANDEM_CUDA_ACTIVATIONS", "bf16", "bf16"},
      {"TANDEM_STEP_TIMING", "on", "1"},
  };
  for (const auto& [name, value, canonical] : good) {
    std::optional<std::string> after;
    const Status s = validate_with(name, value, &after);
    EXPECT_TRUE(s.ok()) << name << "='" << value << "': " << s.message();
    EXPECT_EQ(after.value_or("(unset)"), canonical) << name << "='" << value << "'";
  }
}

// Every TANDEM_* variable src/ reads with getenv (by its literal name) is a GPU
// knob validate_environment checks, and docs/environment.md lists each.
TEST_F(GpuKnobsTest, EveryGetenvInSrcIsValidatedAndDocumented) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "TANDEM_SOURCE_DIR not set";
  const std::filesystem::path src = std::filesystem::path(root) / "src";
  const std::set<std::string> knobs(gpu_knob_names().begin(), gpu_knob_names().end());
  const std::regex getenv_call(R"re(getenv\("(TANDEM_[A-Z0-9_]+)"\))re");
  int found = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator m(s.begin(), s.end(), getenv_call), end; m != end; ++m) {
      ++found;
      EXPECT_TRUE(knobs.count((*m)[1]))
          << entry.path() << " reads " << (*m)[1] << ", which gpu_knobs.cpp lacks";
    }
  }
  EXPECT_GT(found, 10);
  std::ifstream docs(std::filesystem::path(root) / "docs" / "environment.md");
  std::stringstream text;
  text << docs.rdbuf();
  for (const std::string& name : knobs)
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos) << name;
}

// gpu_knobs.cpp mirrors constants of src/kernels/cuda, which a build without
// CUDA does not compile: read them from the source so the mirror cannot drift.
TEST_F(GpuKnobsTest, RangesMatchTheCudaSources) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "TANDEM_SOURCE_DIR not set";
  std::ifstream in(std::filesystem::path(root) / "src" / "kernels" / "cuda" / "gemm.cu");
  std::stringstream text;
  text << in.rdbuf();
  const std::string gemm = text.str();
  const std::pair<const char*, const char*> counts[] = {{"kSmallTileVariants", "TANDEM_CUDA_SMALL_TILE"},
                                                        {"kLargeTileVariants", "TANDEM_CUDA_LARGE_TILE"},
                                                        {"kWideModes", "TANDEM_CUDA_WIDE_TILE"}};
  for (const auto& [constant, name] : counts) {
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(gemm, m, std::regex(std::string("constexpr int ") + constant + R"( = (\d+);)")))
        << constant;
    const int count = std::stoi(m[1]);
    EXPECT_TRUE(canonical_gpu_knob(name, std::to_string(count - 1)).ok()) << name;
    EXPECT_FALSE(canonical_gpu_knob(name, std::to_string(count)).ok()) << name;
  }
  EXPECT_NE(
      gemm.find("return variant == 9 || (variant >= 12 && variant <= 14) || variant == 16 || variant == 17;"),
      std::string::npos)
      << "small_tile_variant_retired changed: update gpu_knobs.cpp's small_tile_retired";
  EXPECT_NE(gemm.find("ok = got >= 2 && v[3] >= 24 && v[3] < 40;"), std::string::npos)
      << "read_by_shape's bound on E changed: update gpu_knobs.cpp";
  std::ifstream attention_in(std::filesystem::path(root) / "src" / "kernels" / "cuda" / "attention.cu");
  std::stringstream attention;
  attention << attention_in.rdbuf();
  for (const char* shape : {"serial", "split", "kvsplit", "tile"}) {
    EXPECT_NE(attention.str().find(std::string("v == \"") + shape + "\""), std::string::npos) << shape;
    EXPECT_TRUE(canonical_gpu_knob("TANDEM_CUDA_ATTENTION", shape).ok()) << shape;
  }
  EXPECT_NE(attention.str().find("v && *v >= 0 && *v <= 65535 ? *v : kKvSplitMinRows"), std::string::npos)
      << "kv_split_min_rows' range changed: update gpu_knobs.cpp's TANDEM_CUDA_KV_SPLIT_ROWS";
  EXPECT_NE(gemm.find("constexpr int64_t kMaxSlices = 16;"), std::string::npos)
      << "gemm_slicing's cap changed: update gpu_knobs.cpp's kMaxSlices (TANDEM_CUDA_SLICE_PLAN)";
  EXPECT_TRUE(canonical_gpu_knob("TANDEM_CUDA_SLICE_PLAN", "6144:4096:16").ok());
  EXPECT_FALSE(canonical_gpu_knob("TANDEM_CUDA_SLICE_PLAN", "6144:4096:17").ok());
}

// TANDEM_CPU_ACTIVATIONS (ADR 0082): f32 / bf16 select the chain, auto (and
// unset) picks bf16 only where vdpbf16ps runs natively, anything else is an
// error naming the variable; validate_environment applies the choice.
TEST(CpuActivations, ChoicesAndErrors) {
  const auto with = [](const char* value) {
    ::setenv("TANDEM_CPU_ACTIVATIONS", value, 1);
    const Status s = validate_environment();
    const kernels::Activations applied = kernels::active_activations();
    ::unsetenv("TANDEM_CPU_ACTIVATIONS");
    kernels::select_activations(kernels::Activations::f32);
    return std::make_pair(s, applied);
  };
  const kernels::Activations native =
      kernels::bf16_activations_native() ? kernels::Activations::bf16 : kernels::Activations::f32;
  EXPECT_EQ(with("bf16").second, kernels::Activations::bf16);
  EXPECT_EQ(with(" F32 ").second, kernels::Activations::f32);
  EXPECT_EQ(with("auto").second, native);
  EXPECT_EQ(with("").second, native);  // blank: the default
  const auto bad = with("fp16");
  ASSERT_FALSE(bad.first.ok());
  EXPECT_NE(bad.first.message().find("TANDEM_CPU_ACTIVATIONS"), std::string::npos) << bad.first.message();
  EXPECT_NE(bad.first.message().find("fp16"), std::string::npos) << bad.first.message();
}

}  // namespace
}  // namespace tandem::app
