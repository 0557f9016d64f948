#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"

namespace tandem {
namespace {

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

TEST(MappedFile, MapsContents) {
  const std::string path = temp_path("tandem_mapped.bin");
  { std::ofstream(path, std::ios::binary) << "hello tandem"; }
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "hello tandem");
  MappedFile moved = std::move(*f);
  EXPECT_EQ(moved.size(), 12u);
  std::remove(path.c_str());
}

// Kilobytes of file-backed pages this process has mapped (RssFile).
int64_t resident_file_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  return -1;
}

// Dropping the resident pages leaves the mapping readable with the same
// bytes, and takes the file's pages out of this process's resident set.
TEST(MappedFile, DroppedPagesReadTheSameAndLeaveTheResidentSet) {
  const std::string path = temp_path("tandem_drop.bin");
  const size_t bytes = size_t{16} << 20;
  std::vector<uint8_t> pattern(bytes);
  for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(pattern.data()), static_cast<std::streamsize>(bytes));
  }
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(std::memcmp(f->data(), pattern.data(), bytes), 0);  // every page touched
  const int64_t before = resident_file_kb();
  f->drop_resident_pages();
  const int64_t after = resident_file_kb();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  EXPECT_GE(before - after, 12 * 1024) << "RssFile " << before << " kB -> " << after << " kB";
  EXPECT_EQ(std::memcmp(f->data(), pattern.data(), bytes), 0);
  MappedFile().drop_resident_pages();  // an empty map: nothing to do
  std::remove(path.c_str());
}

TEST(MappedFile, MissingFileNamesThePath) {
  auto f = MappedFile::open("/nonexistent/tandem/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/tandem/model.safetensors"), std::string::npos);
}

TEST(MappedFile, DirectoryIsRejected) {
  auto f = MappedFile::open(::testing::TempDir());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
}

TEST(AlignedBuffer, IsAlignedAndZeroed) {
  AlignedBuffer<float> b(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kBufferAlignment, 0u);
  for (float v : b) EXPECT_EQ(v, 0.0f);
  AlignedBuffer<float> c = std::move(b);
  EXPECT_EQ(c.size(), 1000u);
  EXPECT_TRUE(b.empty());
}

// A large buffer is its own mapping (page-aligned, prefaulted):
// still zeroed, including after a reallocation that reuses nothing, and it
// moves and is replaced like a small one.
TEST(AlignedBuffer, LargeBuffersAreZeroedMappings) {
  const size_t count =
      (size_t{6} << 20) / sizeof(uint32_t) + 17;  // 6 MiB and a bit (a heap block under ASan)
  AlignedBuffer<uint32_t> b(count);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kBufferAlignment, 0u);
  for (uint32_t v : b) ASSERT_EQ(v, 0u);
  for (size_t i = 0; i < count; ++i) b[i] = static_cast<uint32_t>(i) | 1u;
  b.allocate(count);  // a fresh mapping: the old contents are gone
  for (uint32_t v : b) ASSERT_EQ(v, 0u);
  b[count - 1] = 7;
  AlignedBuffer<uint32_t> c = std::move(b);
  EXPECT_EQ(c.size(), count);
  EXPECT_EQ(c[count - 1], 7u);
  EXPECT_TRUE(b.empty());
  AlignedBuffer<uint32_t> small(8);
  c = std::move(small);  // a mapping replaced by a heap block
  EXPECT_EQ(c.size(), 8u);
  c.allocate(0);
  EXPECT_TRUE(c.empty());
}

}  // namespace
}  // namespace tandem
