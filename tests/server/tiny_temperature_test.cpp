// A temperature too small to divide by (1e-39, a denormal float) is greedy
// (sampling::kGreedyTemperature): the reply is temperature 0's, whatever the seed, on the OpenAI
// routes and llama-server's /completion. Before, every logit / temperature overflowed and the
// request ended in a 400 no_allowed_token blaming the temperature, or in another text.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "served_fixture.h"

namespace tandem::server {
namespace {

using nlohmann::json;

TEST_F(ServedRoutesTest, ATemperatureTooSmallToDivideByIsGreedy) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::pair<const char*, json> routes[] = {
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 16}}},
      {"/v1/completions", {{"prompt", "Call me Ishmael."}, {"max_tokens", 16}}},
      {"/completion", {{"prompt", "Call me Ishmael."}, {"n_predict", 16}}},
  };
  for (const auto& [path, base] : routes) {
    json greedy = base;
    greedy["temperature"] = 0;
    const auto [s0, r0] = post_json(client, path, greedy);
    ASSERT_EQ(s0, 200) << path << ": " << r0;
    const std::string p = path;
    auto text = [&p](const json& r) -> json {
      if (p == "/v1/chat/completions") return r["choices"][0]["message"]["content"];
      if (p == "/completion") return r["content"];
      return r["choices"][0]["text"];
    };
    for (const double temperature : {1e-39, 1e-30, 1e-6}) {
      for (const int seed : {1, 2, 3}) {
        json tiny = base;
        tiny["temperature"] = temperature;
        tiny["seed"] = seed;
        const auto [s, r] = post_json(client, path, tiny);
        ASSERT_EQ(s, 200) << path << " temperature " << temperature << ": " << r;
        EXPECT_EQ(text(r), text(r0)) << path << " temperature " << temperature << " seed " << seed;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::server
