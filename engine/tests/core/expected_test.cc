#include "disagg/expected.h"

#include <gtest/gtest.h>

#include <string>

namespace disagg {
namespace {

enum class Errc { bad };

Expected<int, Errc> parse_positive(int v) {
  if (v <= 0) return unexpected(Errc::bad);
  return v;
}

TEST(Expected, HoldsAValueOrAnError) {
  auto ok = parse_positive(3);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 3);
  EXPECT_EQ(ok.value_or(7), 3);

  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), Errc::bad);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(Expected, SameTypeForValueAndErrorStaysUnambiguous) {
  Expected<std::string, std::string> v = std::string("value");
  Expected<std::string, std::string> e = unexpected(std::string("error"));
  EXPECT_TRUE(v.has_value());
  EXPECT_EQ(v.value(), "value");
  EXPECT_FALSE(e.has_value());
  EXPECT_EQ(e.error(), "error");
}

TEST(Expected, VoidCarriesOnlySuccessOrError) {
  Expected<void, Errc> ok;
  Expected<void, Errc> bad = unexpected(Errc::bad);
  EXPECT_TRUE(ok);
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.error(), Errc::bad);
}

}  // namespace
}  // namespace disagg
