#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tandem::model::testing {

namespace fs = std::filesystem;

std::string fixtures_dir() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
#ifdef TANDEM_MODEL_TEST_SOURCE_DIR
  if (root == nullptr) root = TANDEM_MODEL_TEST_SOURCE_DIR;
#endif
  return (fs::path(root ? root : ".") / "tests" / "fixtures" / "models").string();
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fixtures_dir(), ec)) {
    if (e.is_directory() && fs::exists(e.path() / "reference.json"))
      names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string fixture_path(const std::string& name) { return (fs::path(fixtures_dir()) / name).string(); }

std::string make_temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("tandem_model_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string copy_fixture(const std::string& fixture, const std::string& name) {
  std::string dir = make_temp_dir(name);
  for (const auto& e : fs::directory_iterator(fixture_path(fixture))) {
    if (e.is_regular_file()) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  }
  return dir;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_raw_safetensors(const std::string& path, const std::string& header_json, const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  write_file(path, bytes + header_json + data);
}

Reference load_reference(const std::string& fixture) {
  Reference ref;
  const std::string dir = fixture_path(fixture);
  auto meta = nlohmann::json::parse(read_file(dir + "/reference.json"));
  ref.prompt = meta["prompt"].get<std::vector<int32_t>>();
  ref.continuation = meta["continuation"].get<std::vector<int32_t>>();
  ref.max_abs_logit = meta["max_abs_logit"].get<double>();
  // reference.safetensors holds an I32 tensor too, which the model reader
  // (F32/F16/BF16 only) rejects by design; read the F32 logits directly.
  const std::string bytes = read_file(dir + "/reference.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  const auto& logits = header["logits"];
  EXPECT_EQ(logits["dtype"], "F32");
  ref.tokens = logits["shape"][0].get<int64_t>();
  ref.vocab = logits["shape"][1].get<int64_t>();
  const uint64_t begin = logits["data_offsets"][0].get<uint64_t>();
  ref.logits.resize(static_cast<size_t>(ref.tokens * ref.vocab));
  std::memcpy(ref.logits.data(), bytes.data() + 8 + n + begin, ref.logits.size() * sizeof(float));
  return ref;
}

std::optional<Bf16Bound> bf16_bound(const std::string& name) {
  const auto all = nlohmann::json::parse(read_file(fixture_path("../gpu_bf16_bounds.json")));
  for (const auto& f : all["fixtures"]) {
    if (f.value("name", "") != name || !f.contains("max_abs_err")) continue;
    Bf16Bound b;
    b.max_abs_err = f["max_abs_err"].get<double>();
    b.top1_mismatch = f["top1_mismatch"].get<int>();
    b.continuation_prefix = f["continuation_prefix_match"].get<int>();
    return b;
  }
  return std::nullopt;
}

double top2_margin(const float* logits, int64_t vocab) {
  double first = -INFINITY, second = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    if (logits[i] > first) {
      second = first;
      first = logits[i];
    } else if (logits[i] > second) {
      second = logits[i];
    }
  }
  return first - second;
}

double top2_margin(const Reference& ref, int64_t row) {
  return top2_margin(ref.logits.data() + row * ref.vocab, ref.vocab);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace tandem::model::testing
