// MappedFile: RAII read-only memory map of a whole file.
// Movable, not copyable. The mapping lives until the object is destroyed;
// views into data() must not outlive it. Thread-safe for concurrent reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tandem {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the OS reason.
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Unmaps the pages this process has touched from its address space
  // (MADV_DONTNEED) while keeping the mapping: the next read faults them in
  // again from the page cache, the same bytes (the map is read-only and never
  // written). A model whose matrices were copied out at load drops the
  // file's pages from its resident set this way (ADR 0065). No-op when empty.
  void drop_resident_pages() const;

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; errors name the path.
Expected<std::string> read_text_file(const std::string& path);

// How many times read_text_file has opened `path` (as spelled) in this
// process, successful or not: lets tests assert a file is read once.
int64_t text_file_reads(const std::string& path);

}  // namespace tandem
