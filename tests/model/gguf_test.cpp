// The GGUF reader on hand-built images: every value type, alignment, tensor
// layout, and each class of malformed file as a Status naming what is wrong.
// (Files written by the reference writer, the `gguf` PyPI package, are read in
// tests/runtime/gguf_test.cpp.)
#include "model/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/gguf_model.h"
#include "model/model.h"

namespace tandem::model {
namespace {

// Little-endian GGUF image builder.
class Image {
 public:
  Image& u8(uint8_t v) { return raw(&v, 1); }
  Image& u32(uint32_t v) { return raw(&v, 4); }
  Image& u64(uint64_t v) { return raw(&v, 8); }
  Image& f32(float v) { return raw(&v, 4); }
  Image& str(const std::string& s) {
    u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Image& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  Image& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return raw("GGUF", 4).u32(version).u64(tensors).u64(kvs);
  }
  Image& key(const std::string& k, GgufValueType t) { return str(k).u32(static_cast<uint32_t>(t)); }
  // name, dims (ggml order), type, offset
  Image& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Image& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  Image& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  Expected<GgufFile> parse() const { return GgufFile::parse(bytes.data(), bytes.size(), "test.gguf"); }

  std::vector<uint8_t> bytes;
};

// A valid file: one key of every type, a nested array, two tensors.
Image valid_image() {
  Image im;
  im.header(2, 15);
  im.key("general.architecture", GgufValueType::string).str("llama");
  im.key("k.u8", GgufValueType::uint8).u8(200);
  im.key("k.i8", GgufValueType::int8).u8(0xFF);
  im.key("k.u16", GgufValueType::uint16).raw("\x34\x12", 2);
  im.key("k.i16", GgufValueType::int16).raw("\xFE\xFF", 2);
  im.key("k.u32", GgufValueType::uint32).u32(4000000000u);
  im.key("k.i32", GgufValueType::int32).u32(static_cast<uint32_t>(-7));
  im.key("k.f32", GgufValueType::float32).f32(0.5f);
  im.key("k.bool", GgufValueType::boolean).u8(1);
  im.key("k.u64", GgufValueType::uint64).u64(std::numeric_limits<uint64_t>::max());
  im.key("k.i64", GgufValueType::int64).u64(static_cast<uint64_t>(-5));
  double d = 2.25;
  im.key("k.f64", GgufValueType::float64).raw(&d, 8);
  im.key("k.floats", GgufValueType::array)
      .u32(static_cast<uint32_t>(GgufValueType::float32))
      .u64(2)
      .f32(1.5f)
      .f32(-2);
  im.key("k.strings", GgufValueType::array)
      .u32(static_cast<uint32_t>(GgufValueType::string))
      .u64(2)
      .str("a b")
      .str("");
  im.key("k.nested", GgufValueType::array).u32(static_cast<uint32_t>(GgufValueType::array)).u64(1);
  im.u32(static_cast<uint32_t>(GgufValueType::int32)).u64(3).u32(1).u32(2).u32(3);
  im.tensor("a", {4, 2}, 0, 0);  // F32 [2][4]: 32 bytes
  im.tensor("b", {32}, 8, 32);   // Q8_0, one block: 34 bytes
  im.pad_to(32);
  im.zeros(32 + 34);
  return im;
}

TEST(Gguf, ReadsEveryValueTypeAndTheTensorLayout) {
  const Image im = valid_image();
  auto f = im.parse();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_int("k.u8"), 200);
  EXPECT_EQ(*f->get_int("k.i8"), -1);
  EXPECT_EQ(*f->get_int("k.u16"), 0x1234);
  EXPECT_EQ(*f->get_int("k.i16"), -2);
  EXPECT_EQ(*f->get_int("k.u32"), 4000000000);
  EXPECT_EQ(*f->get_int("k.i32"), -7);
  EXPECT_EQ(*f->get_float("k.f32"), 0.5);
  EXPECT_TRUE(*f->get_bool("k.bool"));
  EXPECT_FALSE(f->get_int("k.u64").ok());  // beyond int64
  EXPECT_EQ(f->find("k.u64")->uinteger, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f->get_int("k.i64"), -5);
  EXPECT_EQ(*f->get_float("k.f64"), 2.25);
  EXPECT_EQ(*f->get_float_array("k.floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(*f->get_string_array("k.strings"), (std::vector<std::string_view>{"a b", ""}));
  const GgufValue* nested = f->find("k.nested");
  ASSERT_EQ(nested->arrays.size(), 1u);
  EXPECT_EQ(nested->arrays[0].count, 3u);
  auto wrong = f->get_string("k.u8");
  EXPECT_EQ(wrong.status().message(), "test.gguf: metadata \"k.u8\" must be a string, got uint8");
  EXPECT_EQ(f->get_int("absent").status().code(), StatusCode::kNotFound);

  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor* a = f->find_tensor("a");
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(a->bytes, 32u);
  EXPECT_EQ(a->data, im.bytes.data() + f->data_offset());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->find_tensor("b")->bytes, 34u);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const Image im = valid_image();
  for (size_t n = 0; n < im.bytes.size(); ++n) {
    auto f = GgufFile::parse(im.bytes.data(), n, "t.gguf");
    EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes was accepted";
  }
}

// Parses and returns the message (empty when accepted).
std::string error_of(const Image& im) {
  auto f = im.parse();
  return f.ok() ? "" : f.status().message();
}

TEST(Gguf, MalformedHeadersAreNamed) {
  Image magic;
  magic.raw("GGML", 4).u32(3).u64(0).u64(0);
  EXPECT_EQ(error_of(magic), "test.gguf: not a GGUF file (the first 4 bytes are not \"GGUF\")");
  Image v1;
  v1.header(0, 0, 1);
  EXPECT_EQ(error_of(v1), "test.gguf: GGUF version 1 is not supported (versions 2 and 3 are)");
  Image big_endian;
  big_endian.header(0, 0, 0x03000000u);
  EXPECT_NE(error_of(big_endian).find("big-endian"), std::string::npos);
  Image tensors;
  tensors.header(uint64_t{1} << 60, 0);
  EXPECT_NE(error_of(tensors).find("tensor count 1152921504606846976 is more than the file can hold"),
            std::string::npos);
  Image kvs;
  kvs.header(0, std::numeric_limits<uint64_t>::max());
  EXPECT_NE(error_of(kvs).find("metadata count"), std::string::npos);
  Image empty;
  empty.header(0, 0);
  EXPECT_EQ(error_of(empty), "");  // no tensors, no metadata: valid
}

TEST(Gguf, MalformedMetadataIsNamed) {
  Image len;
  len.header(0, 1).u64(uint64_t{1} << 40).zeros(16);
  EXPECT_NE(error_of(len).find("metadata key 0 has length 1099511627776, beyond the end of the file"),
            std::string::npos);
  Image type;
  type.header(0, 1).key("x", static_cast<GgufValueType>(13)).u32(0);
  EXPECT_NE(error_of(type).find("metadata \"x\" has unknown value type 13"), std::string::npos);
  Image count;
  count.header(0, 1).key("x", GgufValueType::array).u32(static_cast<uint32_t>(GgufValueType::string));
  count.u64(uint64_t{1} << 62);
  EXPECT_NE(error_of(count).find("4611686018427387904 elements of string do not fit in the file"),
            std::string::npos);
  Image scalars;
  scalars.header(0, 1).key("x", GgufValueType::array).u32(static_cast<uint32_t>(GgufValueType::uint64));
  scalars.u64(std::numeric_limits<uint64_t>::max() / 4);
  EXPECT_NE(error_of(scalars).find("elements of uint64 do not fit in the file"), std::string::npos);
  Image deep;
  deep.header(0, 1).key("x", GgufValueType::array);
  for (int i = 0; i < 20; ++i) deep.u32(static_cast<uint32_t>(GgufValueType::array)).u64(1);
  deep.zeros(64);
  EXPECT_NE(error_of(deep).find("arrays nested deeper than 8"), std::string::npos);
  Image dup;
  dup.header(0, 2).key("x", GgufValueType::uint8).u8(1).key("x", GgufValueType::uint8).u8(2);
  EXPECT_NE(error_of(dup).find("metadata key \"x\" appears twice"), std::string::npos);
  Image boolean;
  boolean.header(0, 1).key("x", GgufValueType::boolean).u8(2);
  EXPECT_NE(error_of(boolean).find("bool value 2 is neither 0 nor 1"), std::string::npos);
  Image align;
  align.header(0, 1).key("general.alignment", GgufValueType::uint32).u32(24);
  EXPECT_EQ(error_of(align), "test.gguf: general.alignment 24 is not a power of two up to 1048576");
  Image align_type;
  align_type.header(0, 1).key("general.alignment", GgufValueType::uint64).u64(32);
  EXPECT_EQ(error_of(align_type), "test.gguf: metadata \"general.alignment\" must be a uint32, got uint64");
}

// One tensor with the given info and `data` bytes of data section.
Image one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
  Image im;
  im.header(1, 0).tensor("t", std::move(dims), type, offset).pad_to(32).zeros(data);
  return im;
}

TEST(Gguf, MalformedTensorInfosAreNamed) {
  EXPECT_EQ(error_of(one_tensor({4}, 0, 0, 16)), "");
  EXPECT_NE(error_of(one_tensor({4}, 77, 0, 16)).find("tensor \"t\" has unknown type id 77"),
            std::string::npos);
  EXPECT_NE(error_of(one_tensor({0}, 0, 0, 16)).find("dimension 0 (0) is zero"), std::string::npos);
  EXPECT_NE(error_of(one_tensor({1, 1, 1, 1, 1}, 0, 0, 16)).find("has 5 dimensions (1 to 4 allowed)"),
            std::string::npos);
  EXPECT_NE(error_of(one_tensor({uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0, 16)).find("larger than 2^62"),
            std::string::npos);
  EXPECT_NE(error_of(one_tensor({4}, 0, 32, 16))
                .find("tensor \"t\" (16 bytes at offset 32) lies beyond the end of the file (data section of "
                      "16 bytes)"),
            std::string::npos);
  EXPECT_NE(
      error_of(one_tensor({4}, 0, std::numeric_limits<uint64_t>::max() - 31, 16)).find("beyond the end"),
      std::string::npos);
  EXPECT_NE(error_of(one_tensor({4}, 0, 4, 64)).find("offset 4 is not a multiple of the alignment 32"),
            std::string::npos);
  EXPECT_NE(
      error_of(one_tensor({16}, 8, 0, 64)).find("first dimension 16 is not a multiple of the block size 32"),
      std::string::npos);
  Image overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_to(32).zeros(128);
  EXPECT_NE(error_of(overlap).find("tensor \"b\" overlaps tensor \"a\""), std::string::npos);
  Image dup;
  dup.header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32).zeros(64);
  EXPECT_NE(error_of(dup).find("tensor \"a\" appears twice"), std::string::npos);
  Image long_name;
  long_name.header(1, 0).tensor(std::string(65, 'n'), {8}, 0, 0).pad_to(32).zeros(32);
  EXPECT_NE(error_of(long_name).find("name of 65 bytes is longer than 64"), std::string::npos);
}

TEST(GgufModel, TypesMapToKernelsOrAreRefusedByName) {
  EXPECT_EQ(*gguf_kernel_dtype(0, "x"), kernels::DType::f32);
  EXPECT_EQ(*gguf_kernel_dtype(1, "x"), kernels::DType::f16);
  EXPECT_EQ(*gguf_kernel_dtype(30, "x"), kernels::DType::bf16);
  EXPECT_EQ(*gguf_kernel_dtype(8, "x"), kernels::DType::q8_0);
  EXPECT_EQ(*gguf_kernel_dtype(2, "x"), kernels::DType::q4_0);
  EXPECT_EQ(*gguf_kernel_dtype(6, "x"), kernels::DType::q5_0);
  EXPECT_EQ(*gguf_kernel_dtype(12, "x"), kernels::DType::q4_k);
  EXPECT_EQ(*gguf_kernel_dtype(13, "x"), kernels::DType::q5_k);
  EXPECT_EQ(*gguf_kernel_dtype(14, "x"), kernels::DType::q6_k);
  for (uint32_t t : {3u, 7u, 10u, 11u})
    EXPECT_FALSE(gguf_kernel_dtype(t, "w").ok());  // Q4_1, Q5_1, Q2_K, Q3_K
  auto iq = gguf_kernel_dtype(17, "blk.3.ffn_down.weight");
  EXPECT_EQ(
      iq.status().message(),
      "tensor blk.3.ffn_down.weight has type IQ2_XS, which tandem does not load (supported: F32, F16, BF16, "
      "Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K)");
}

TEST(GgufModel, TensorNamesMapToHuggingFace) {
  EXPECT_EQ(hf_tensor_name("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(hf_tensor_name("output.weight"), "lm_head.weight");
  EXPECT_EQ(hf_tensor_name("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf_tensor_name("blk.12.attn_q.bias"), "model.layers.12.self_attn.q_proj.bias");
  EXPECT_EQ(hf_tensor_name("blk.0.attn_k_norm.weight"), "model.layers.0.self_attn.k_norm.weight");
  EXPECT_EQ(hf_tensor_name("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("blk.3.ffn_down.weight"), "model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(hf_tensor_name("blk.1.ffn_up_exps.weight"), "model.layers.1.mlp.experts.up_proj.weight");
  EXPECT_EQ(hf_tensor_name("rope_freqs.weight"), "");
  EXPECT_EQ(hf_tensor_name("blk.x.attn_q.weight"), "");
  EXPECT_EQ(hf_tensor_name("blk.0.attn_q"), "");
}

// The config a minimal llama GGUF describes.
Image config_image(const std::string& arch, bool with_output, uint64_t embedding_columns = 64) {
  Image im;
  const std::string a = arch + ".";
  im.header(with_output ? 2 : 1, 9);
  im.key("general.architecture", GgufValueType::string).str(arch);
  im.key(a + "embedding_length", GgufValueType::uint32).u32(64);
  im.key(a + "block_count", GgufValueType::uint32).u32(2);
  im.key(a + "feed_forward_length", GgufValueType::uint32).u32(128);
  im.key(a + "attention.head_count", GgufValueType::uint32).u32(4);
  im.key(a + "attention.head_count_kv", GgufValueType::uint32).u32(2);
  im.key(a + "attention.layer_norm_rms_epsilon", GgufValueType::float32).f32(1e-5f);
  im.key(a + "rope.freq_base", GgufValueType::float32).f32(500000.0f);
  im.key("tokenizer.ggml.eos_token_id", GgufValueType::uint32).u32(7);
  im.tensor("token_embd.weight", {embedding_columns, 10}, 30, 0);
  if (with_output) im.tensor("output.weight", {64, 10}, 30, 1280);
  im.pad_to(32).zeros(2560);
  return im;
}

TEST(GgufModel, HyperParametersBecomeTheConfig) {
  const Image im = config_image("llama", false);
  auto f = im.parse();
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto c = gguf_config(*f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->family, Family::llama);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->vocab_size, 10);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(c->declared_dtype, kernels::DType::bf16);
  const Image untied = config_image("qwen2", true);
  auto q = gguf_config(*untied.parse());
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_FALSE(q->tie_word_embeddings);
  EXPECT_TRUE(q->qkv_bias);
  auto gemma = gguf_config(*config_image("gemma2", false).parse());
  EXPECT_EQ(gemma.status().message(),
            "test.gguf: general.architecture \"gemma2\" is not supported (supported: llama, mistral, qwen2, "
            "qwen3, qwen2moe, qwen3moe)");
}

TEST(GgufModel, AnInMemorySplitIsRefused) {
  Image im;
  im.header(0, 2).key("split.count", GgufValueType::uint16).raw("\x03\x00", 2);
  im.key("general.architecture", GgufValueType::string).str("llama");
  auto c = gguf_config(*im.parse());
  EXPECT_EQ(c.status().message(),
            "test.gguf: one of 3 split GGUF files (split.count) whose other splits were not opened");
}

TEST(GgufModel, MissingHyperParameterIsNamed) {
  Image im;
  im.header(0, 1).key("general.architecture", GgufValueType::string).str("qwen3");
  auto c = gguf_config(*im.parse());
  EXPECT_EQ(c.status().message(), "test.gguf: metadata \"qwen3.embedding_length\" is missing");
}

TEST(GgufModel, ShapeMismatchNamesBothTensorNames) {
  const Image im = config_image("llama", false, 32);
  auto f = im.parse();
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto config = gguf_config(*f);
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto file = std::make_shared<const GgufFile>(std::move(*f));
  auto checkpoint = gguf_checkpoint(file, *config);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  auto model = Model::load(std::move(*checkpoint), *config);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(
      model.status().message(),
      "test.gguf (GGUF tensor token_embd.weight): tensor \"model.embed_tokens.weight\" has shape [10, 32], "
      "expected [10, 64] from the GGUF metadata");
  auto missing = Model::load(*gguf_checkpoint(file, *config), *config);  // (same file; norms absent too)
  EXPECT_FALSE(missing.ok());
}

// qwen3moe's expert stacks must be [experts][rows][cols]: a 2-D "stack" is an
// error naming the tensor, never a misread slab.
TEST(GgufModel, AnExpertStackThatIsNotThreeDimensionalIsRefused) {
  Image im;
  im.header(1, 4);
  im.key("general.architecture", GgufValueType::string).str("qwen3moe");
  im.key("qwen3moe.embedding_length", GgufValueType::uint32).u32(64);
  im.key("qwen3moe.block_count", GgufValueType::uint32).u32(1);
  im.key("qwen3moe.attention.head_count", GgufValueType::uint32).u32(4);
  im.tensor("blk.0.ffn_gate_exps.weight", {64, 32}, 0, 0);  // f32 [32][64]: no expert dimension
  im.pad_to(32).zeros(64 * 32 * 4);
  auto f = im.parse();
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto file = std::make_shared<const GgufFile>(std::move(*f));
  auto checkpoint = gguf_checkpoint(file, ModelConfig{});
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().message(),
            "test.gguf: tensor \"blk.0.ffn_gate_exps.weight\" must be a [experts][rows][cols] stack of whole "
            "experts");
}

TEST(GgufModel, GgufFilesAreRecognisedByTheirMagic) {
  const std::string dir = ::testing::TempDir() + "/tandem_gguf_magic_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  Image im;
  im.header(0, 0);
  std::ofstream(dir + "/model.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(im.bytes.data()), static_cast<std::streamsize>(im.bytes.size()));
  std::ofstream(dir + "/other.gguf") << "not gguf";
  EXPECT_TRUE(is_gguf_path(dir + "/model.bin"));
  EXPECT_TRUE(is_gguf_path(dir + "/other.gguf"));  // by name: opening it says it is not GGUF
  EXPECT_EQ(GgufFile::open(dir + "/other.gguf").status().message(),
            dir + "/other.gguf: not a GGUF file (the first 4 bytes are not \"GGUF\")");
  EXPECT_TRUE(is_gguf_path(dir + "/absent.GGUF"));
  EXPECT_FALSE(is_gguf_path(dir + "/absent"));
  EXPECT_FALSE(is_gguf_path(dir));
  EXPECT_EQ(GgufFile::open(dir + "/absent.gguf").status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(GgufModel, RowsInHfOrderUndoesTheInterleave) {
  // Two heads of 4 rows, one byte per row: stored 2i = HF i, 2i+1 = HF 2 + i.
  const uint8_t stored[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  TensorView v;
  v.shape = {8};
  v.data = stored;
  v.bytes = 8;
  v.rope_group_rows = 4;
  std::vector<uint8_t> scratch;
  const uint8_t* hf = rows_in_hf_order(v, scratch);
  EXPECT_EQ(std::vector<uint8_t>(hf, hf + 8), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  v.rope_group_rows = 0;
  EXPECT_EQ(rows_in_hf_order(v, scratch), stored);
}

}  // namespace
}  // namespace tandem::model
