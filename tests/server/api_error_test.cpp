#include "server/api_error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

TEST(ApiError, BodyHasTheOpenAIShape) {
  auto body = nlohmann::json::parse(error_body(bad_request("temperature", "'temperature' must be a number")));
  ASSERT_TRUE(body.contains("error"));
  const auto& e = body["error"];
  EXPECT_EQ(e["message"], "'temperature' must be a number");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "temperature");
  EXPECT_EQ(e["code"], "invalid_value");
  auto u = nlohmann::json::parse(error_body(unauthorized()));
  EXPECT_TRUE(u["error"]["param"].is_null());
}

TEST(ApiError, StatusesMapToHttpCodes) {
  EXPECT_EQ(unauthorized().http_status, 401);
  EXPECT_EQ(model_not_found("x").http_status, 404);
  EXPECT_EQ(payload_too_large(10, 5).http_status, 413);
  EXPECT_EQ(unavailable("loading").http_status, 503);
  EXPECT_EQ(from_status(invalid_argument("bad")).http_status, 400);
  EXPECT_EQ(from_status(resource_exhausted("full")).http_status, 429);
  EXPECT_EQ(from_status(internal_error("bug")).http_status, 500);
}

// A message may quote client bytes that are not UTF-8 (a percent-decoded path): the body is still
// JSON, each such byte replaced by U+FFFD (EF BF BD), instead of an exception from the serializer.
TEST(ApiError, BodyOfAMessageThatIsNotUtf8IsStillJson) {
  std::string body;
  ASSERT_NO_THROW(body = error_body(route_not_found("GET", "/\xff\xc3")));
  auto parsed = nlohmann::json::parse(body);
  EXPECT_EQ(parsed["error"]["message"], "No route for GET /\xEF\xBF\xBD\xEF\xBF\xBD");
  ASSERT_NO_THROW(body = error_body(model_not_found("a\x80")));
  EXPECT_EQ(nlohmann::json::parse(body)["error"]["code"], "model_not_found");
}

}  // namespace
}  // namespace tandem::server
