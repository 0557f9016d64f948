#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace tandem {
namespace {

TEST(Env, ParseBoolAcceptsTheDocumentedSpellings) {
  for (const char* t : {"1", "true", "TRUE", " yes ", "On", "\ttrue\n"}) EXPECT_EQ(parse_bool(t), true) << t;
  for (const char* f : {"0", "false", "No", " off "}) EXPECT_EQ(parse_bool(f), false) << f;
  for (const char* u : {"", "2", "enable", "y"}) EXPECT_EQ(parse_bool(u), std::nullopt) << u;
}

TEST(Env, ReadsVariables) {
  ::setenv("TANDEM_TEST_ENV_VALUE", " yes", 1);
  EXPECT_EQ(env_string("TANDEM_TEST_ENV_VALUE"), " yes");
  EXPECT_EQ(env_bool("TANDEM_TEST_ENV_VALUE"), true);
  ::unsetenv("TANDEM_TEST_ENV_VALUE");
  EXPECT_EQ(env_string("TANDEM_TEST_ENV_VALUE"), std::nullopt);
}

}  // namespace
}  // namespace tandem

#include "core/sha256.h"

namespace tandem {
namespace {

// Known answers (FIPS 180-4 examples and the empty string).
TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(Env, ParseIntTakesWholeDecimalIntegersOnly) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int(" -7\n"), -7);
  EXPECT_EQ(parse_int("+3"), 3);
  EXPECT_EQ(parse_int("9223372036854775807"), INT64_MAX);
  for (const char* bad :
       {"", " ", "-", "+", "4x", "x4", "0x10", "1e3", "4.0", "+-4", "4 5", "9223372036854775808"})
    EXPECT_EQ(parse_int(bad), std::nullopt) << bad;
}

TEST(Env, ParseIntListSplitsOnAnyOfTheSeparators) {
  EXPECT_EQ(parse_int_list("6144:4096:11", ":,"), (std::vector<int64_t>{6144, 4096, 11}));
  EXPECT_EQ(parse_int_list(" 1:2:3 , 4:5:6", ":,"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(parse_int_list("-7", ","), (std::vector<int64_t>{-7}));
  for (const char* bad : {"", "1:", ":1", "1::2", "1,,2", "1:x", "1;2", "1.5"})
    EXPECT_EQ(parse_int_list(bad, ":,"), std::nullopt) << bad;
}

TEST(Env, BlankValuesCountAsUnset) {
  EXPECT_TRUE(is_blank(""));
  EXPECT_TRUE(is_blank(" \t\n"));
  EXPECT_FALSE(is_blank(" 0 "));
}

TEST(Env, CheckBoolNamesTheVariableAndTheValue) {
  EXPECT_TRUE(check_bool_value("TANDEM_X", " Off ").ok());
  const Status s = check_bool_value("TANDEM_MTP_ADAPTIVE", "bogus");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "TANDEM_MTP_ADAPTIVE='bogus' is not a boolean; accepted: 1, true, yes, on, 0, false, no, off");
}

TEST(Env, CheckIntEnforcesTheRange) {
  EXPECT_TRUE(check_int_value("TANDEM_K", "2", 2, 16).ok());
  EXPECT_TRUE(check_int_value("TANDEM_K", "16", 2, 16).ok());
  EXPECT_EQ(check_int_value("TANDEM_K", "17", 2, 16).message(),
            "TANDEM_K='17' is out of range; accepted: 2..16");
  EXPECT_EQ(check_int_value("TANDEM_K", "1", 2, 16).message(),
            "TANDEM_K='1' is out of range; accepted: 2..16");
  EXPECT_EQ(check_int_value("TANDEM_K", "four", 2, 16).message(),
            "TANDEM_K='four' is not an integer; accepted: 2..16");
}

TEST(Env, CheckChoiceIsCaseInsensitiveAndListsTheChoices) {
  EXPECT_TRUE(check_choice_value("TANDEM_GEMM", " SplitK ", {"invariant", "splitk"}).ok());
  EXPECT_EQ(check_choice_value("TANDEM_GEMM", "fast", {"invariant", "splitk"}).message(),
            "TANDEM_GEMM='fast' is not one of: invariant, splitk");
}

}  // namespace
}  // namespace tandem
