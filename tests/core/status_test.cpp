#include "core/status.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(Status, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = not_found("model.safetensors: No such file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NotFound: model.safetensors: No such file");
  EXPECT_EQ(s.with_context("loading /m").message(), "loading /m: model.safetensors: No such file");
}

Expected<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

Expected<int> doubled(int v) {
  TANDEM_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_even(int v) {
  TANDEM_RETURN_IF_ERROR(parse_positive(v).status());
  if (v % 2) return invalid_argument("odd");
  return Status::Ok();
}

TEST(Expected, ValueAndErrorPropagate) {
  EXPECT_EQ(doubled(4).value(), 8);
  auto e = doubled(-1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "value must be positive, got -1");
  EXPECT_TRUE(check_even(2).ok());
  EXPECT_EQ(check_even(3).message(), "odd");
  EXPECT_EQ(check_even(-3).code(), StatusCode::kInvalidArgument);
}

TEST(Expected, OkStatusBecomesInternalError) {
  Expected<int> e{Status::Ok()};
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tandem
