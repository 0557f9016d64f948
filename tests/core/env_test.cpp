#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>

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
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace tandem
