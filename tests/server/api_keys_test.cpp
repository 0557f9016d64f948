#include "server/api_keys.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tandem::server {
namespace {

TEST(ApiKeys, NoKeysMeansOpen) {
  auto keys = ApiKeys::load("", "");
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE(keys->enabled());
  EXPECT_TRUE(keys->allows(std::nullopt, std::nullopt));
}

TEST(ApiKeys, BearerAndXApiKeyAreAccepted) {
  auto keys = ApiKeys::load("alpha, beta", "");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->allows(std::string("Bearer alpha"), std::nullopt));
  EXPECT_TRUE(keys->allows(std::string("bearer beta"), std::nullopt));
  EXPECT_TRUE(keys->allows(std::nullopt, std::string("beta")));
  EXPECT_FALSE(keys->allows(std::nullopt, std::nullopt));
  EXPECT_FALSE(keys->allows(std::string("Bearer alph"), std::nullopt));
  EXPECT_FALSE(keys->allows(std::string("Bearer alphaa"), std::nullopt));
  EXPECT_FALSE(keys->allows(std::string("alpha"), std::nullopt));  // scheme required
  EXPECT_FALSE(keys->allows(std::nullopt, std::string("")));
}

TEST(ApiKeys, FileWithCommentsAndErrors) {
  const std::string path = ::testing::TempDir() + "tandem_keys.txt";
  { std::ofstream(path) << "# operators\nk1\n\n  k2  \n"; }
  auto keys = ApiKeys::load("", path);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_TRUE(keys->matches("k2"));
  EXPECT_FALSE(keys->matches("# operators"));
  { std::ofstream(path) << "# nothing\n"; }
  EXPECT_NE(ApiKeys::load("", path).status().message().find("contains no keys"), std::string::npos);
  EXPECT_NE(ApiKeys::load("", "/nonexistent/keys").status().message().find("/nonexistent/keys"),
            std::string::npos);
  EXPECT_FALSE(ApiKeys::load("a,,b", "").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::server
