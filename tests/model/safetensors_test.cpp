// safetensors header validation: every malformed file is a Status naming the
// file (and the tensor, where one is involved), never a crash.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tandem::model {
namespace {

using testing::make_temp_dir;
using testing::write_raw_safetensors;

std::string f32_data(size_t floats) { return std::string(floats * 4, '\0'); }

void expect_error(const Expected<SafetensorsFile>& f, const std::string& path, const std::string& needle) {
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
}

TEST(Safetensors, ReadsValidFile) {
  const std::string path = make_temp_dir("st_valid") + "/a.safetensors";
  write_raw_safetensors(
      path,
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
      f32_data(5));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_NE(f->find("w"), nullptr);
  EXPECT_EQ(f->find("w")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f->find("w")->dtype, kernels::DType::bf16);
  EXPECT_EQ(f->find("b")->bytes, 8u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->find("nope"), nullptr);
}

// parse() validates an in-memory image exactly as open() validates the file.
TEST(Safetensors, ParseFromMemoryMatchesOpen) {
  const std::string path = make_temp_dir("st_memory") + "/a.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})",
                        std::string(6, '\x01'));
  const std::string image = testing::read_file(path);
  const auto* bytes = reinterpret_cast<const uint8_t*>(image.data());
  auto f = SafetensorsFile::parse(bytes, image.size(), "mem.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->path(), "mem.safetensors");
  ASSERT_NE(f->find("w"), nullptr);
  EXPECT_EQ(f->find("w")->data, bytes + image.size() - 6);
  EXPECT_EQ(f->find("w")->file, "mem.safetensors");
  expect_error(SafetensorsFile::parse(bytes, image.size() - 1, "mem.safetensors"), "mem.safetensors",
               "truncated");
  expect_error(SafetensorsFile::parse(bytes, 7, "mem.safetensors"), "mem.safetensors", "too short");
}

TEST(Safetensors, WriterRoundTrips) {
  const std::string path = make_temp_dir("st_write") + "/w.safetensors";
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3f80, 0x4000};
  ASSERT_TRUE(write_safetensors(path, {{"a", kernels::DType::f32, {2, 3}, a.data()},
                                       {"b", kernels::DType::bf16, {2}, b.data()}})
                  .ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(std::memcmp(f->find("a")->data, a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(f->find("b")->data, b.data(), 4), 0);
}

TEST(Safetensors, MissingFile) {
  auto f = SafetensorsFile::open("/nonexistent/tandem/x.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/tandem/x.safetensors"), std::string::npos);
}

TEST(Safetensors, TooShortForHeader) {
  const std::string path = make_temp_dir("st_short") + "/s.safetensors";
  testing::write_file(path, "abc");
  expect_error(SafetensorsFile::open(path), path, "too short");
}

TEST(Safetensors, HeaderLengthPastEnd) {
  const std::string path = make_temp_dir("st_hlen") + "/h.safetensors";
  std::string bytes(8, '\0');
  bytes[0] = 100;  // header claims 100 bytes, file has 2
  testing::write_file(path, bytes + "{}");
  expect_error(SafetensorsFile::open(path), path, "runs past the end");
}

TEST(Safetensors, HeaderLengthOverLimit) {
  const std::string path = make_temp_dir("st_hlim") + "/h.safetensors";
  std::string bytes(8, '\0');
  bytes[5] = 1;  // 2^40
  testing::write_file(path, bytes + "{}");
  expect_error(SafetensorsFile::open(path), path, "exceeds");
}

TEST(Safetensors, HeaderNotJson) {
  const std::string path = make_temp_dir("st_json") + "/j.safetensors";
  write_raw_safetensors(path, "{not json", "");
  expect_error(SafetensorsFile::open(path), path, "not valid JSON");
}

TEST(Safetensors, BadDtypeNamesTensor) {
  const std::string path = make_temp_dir("st_dtype") + "/d.safetensors";
  write_raw_safetensors(path, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", f32_data(4));
  expect_error(SafetensorsFile::open(path), path, "\"ids\"");
  expect_error(SafetensorsFile::open(path), path, "I64");
}

TEST(Safetensors, ShapeSizeMismatchNamesTensor) {
  const std::string path = make_temp_dir("st_size") + "/z.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", f32_data(5));
  expect_error(SafetensorsFile::open(path), path, "\"w\"");
  expect_error(SafetensorsFile::open(path), path, "does not match shape [2, 3]");
}

TEST(Safetensors, OffsetsOutOfRange) {
  const std::string path = make_temp_dir("st_range") + "/r.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", f32_data(4));
  expect_error(SafetensorsFile::open(path), path, "\"w\"");
  expect_error(SafetensorsFile::open(path), path, "run past the data section");
}

TEST(Safetensors, ReversedOffsets) {
  const std::string path = make_temp_dir("st_rev") + "/r.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", f32_data(4));
  expect_error(SafetensorsFile::open(path), path, "reversed");
}

TEST(Safetensors, OverlappingTensors) {
  const std::string path = make_temp_dir("st_overlap") + "/o.safetensors";
  write_raw_safetensors(path,
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        f32_data(3));
  expect_error(SafetensorsFile::open(path), path, "overlaps");
}

TEST(Safetensors, TruncatedFile) {
  const std::string path = make_temp_dir("st_trunc") + "/t.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}})",
                        std::string(10, '\0'));
  expect_error(SafetensorsFile::open(path), path, "truncated");
}

TEST(Safetensors, NegativeShape) {
  const std::string path = make_temp_dir("st_neg") + "/n.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f32_data(1));
  expect_error(SafetensorsFile::open(path), path, "\"w\"");
}

TEST(Safetensors, MissingFields) {
  const std::string path = make_temp_dir("st_fields") + "/m.safetensors";
  write_raw_safetensors(path, R"({"w":{"dtype":"F32","shape":[1]}})", f32_data(1));
  expect_error(SafetensorsFile::open(path), path, "data_offsets");
  write_raw_safetensors(path, R"({"w":5})", "");
  expect_error(SafetensorsFile::open(path), path, "\"w\"");
}

}  // namespace
}  // namespace tandem::model
