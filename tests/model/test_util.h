// Helpers shared by the model tests: fixture paths, scratch directories and
// the golden reference reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::model::testing {

// $TANDEM_SOURCE_DIR/tests/fixtures/models (else the source dir compiled in).
std::string fixtures_dir();
// Names of every fixture model directory, sorted.
std::vector<std::string> fixture_names();
std::string fixture_path(const std::string& name);

// A fresh empty directory under the test temp dir.
std::string make_temp_dir(const std::string& name);
// Copies every regular file of `from` into a fresh temp dir named `name`.
std::string copy_fixture(const std::string& fixture, const std::string& name);
void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);
// A .safetensors file from a raw JSON header and data section.
void write_raw_safetensors(const std::string& path, const std::string& header_json, const std::string& data);

struct Reference {
  std::vector<int32_t> prompt, continuation;
  std::vector<float> logits;  // [tokens][vocab]
  int64_t tokens = 0, vocab = 0;
  double max_abs_logit = 0;
};
// Reads reference.json + reference.safetensors of a fixture.
Reference load_reference(const std::string& fixture);

// How far transformers' own bf16 forward of a fixture lands from its f32 goldens
// (tests/fixtures/gpu_bf16_bounds.json, tools/fixtures/make_bf16_bounds.py); nullopt
// when the file has no measurement for `name`.
struct Bf16Bound {
  double max_abs_err = 0;
  int top1_mismatch = 0;
  int continuation_prefix = 0;  // leading greedy ids equal to the f32 continuation
};
std::optional<Bf16Bound> bf16_bound(const std::string& name);

// The gap between the largest and second largest of `vocab` logits.
double top2_margin(const float* logits, int64_t vocab);
// The goldens' top-2 gap at row `row`.
double top2_margin(const Reference& ref, int64_t row);
// How many leading ids a and b share.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace tandem::model::testing
