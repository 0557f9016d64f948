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
