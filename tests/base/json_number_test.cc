#include "braid/base/json_number.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

using json = nlohmann::json;

TEST(JsonInteger, ReadsIntegersInRange) {
  EXPECT_EQ(json_integer<int64_t>(json(-5)), -5);
  EXPECT_EQ(json_integer<uint64_t>(json(uint64_t{1} << 63)), uint64_t{1} << 63);
  EXPECT_EQ(json_integer<int>(json::parse("2147483647")), 2147483647);
  EXPECT_EQ(json_integer<uint32_t>(json::parse("4294967295")), 4294967295u);
  EXPECT_EQ(json_integer<int64_t>(json::parse("-9223372036854775808")), INT64_MIN);
}

TEST(JsonInteger, RefusesFloatsWhoseCastWouldBeUndefined) {
  // nlohmann's get<int64_t>() casts these; a double past int64's range is UB.
  EXPECT_THROW(json_integer<int64_t>(json::parse("1e300")), json::type_error);
  EXPECT_THROW(json_integer<int64_t>(json::parse("3.0")), json::type_error);
  EXPECT_THROW(json_integer<uint64_t>(json::parse("-0.5")), json::type_error);
}

TEST(JsonInteger, RefusesIntegersOutsideTheType) {
  EXPECT_THROW(json_integer<int64_t>(json::parse("9223372036854775808")), json::type_error);
  EXPECT_THROW(json_integer<uint64_t>(json(-1)), json::type_error);
  EXPECT_THROW(json_integer<int>(json::parse("2147483648")), json::type_error);
  EXPECT_THROW(json_integer<uint32_t>(json::parse("4294967296")), json::type_error);
  EXPECT_THROW(json_integer<int>(json("7")), json::type_error);
  EXPECT_THROW(json_integer<int>(json(true)), json::type_error);
}

TEST(JsonInteger, MessageNamesTheRangeAndTheValue) {
  try {
    json_integer<int>(json::parse("1e300"));
    FAIL();
  } catch (const json::type_error& e) {
    EXPECT_NE(std::string(e.what()).find("[-2147483648, 2147483647], got 1e+300"), std::string::npos) << e.what();
  }
}

TEST(JsonInteger, OrFallsBackOnlyWhenTheKeyIsAbsent) {
  const json j = {{"n", 4}, {"x", 2.5}};
  EXPECT_EQ(json_integer_or(j, "n", int64_t{1}), 4);
  EXPECT_EQ(json_integer_or(j, "m", int64_t{1}), 1);
  EXPECT_THROW(json_integer_or(j, "x", int64_t{1}), json::type_error);
}

}  // namespace
}  // namespace braid
