#include <catch2/catch.hpp>

#include "core/text.hpp"

using namespace banyan;

TEST_CASE("replace_all replaces left to right without rescanning", "[text]") {
    CHECK(replace_all("out.{{id}}.{{id}}", "{{id}}", "f7") == "out.f7.f7");
    CHECK(replace_all("aaa", "a", "aa") == "aaaaaa");
    CHECK(replace_all("none", "{{x}}", "y") == "none");
}

TEST_CASE("utf8_complete_length holds back only a cut character", "[text]") {
    CHECK(utf8_complete_length("") == 0);
    CHECK(utf8_complete_length("plain") == 5);
    CHECK(utf8_complete_length("é") == 2);               // C3 A9: whole
    CHECK(utf8_complete_length("a\xC3") == 1);           // é's first byte
    CHECK(utf8_complete_length("a\xE2\x82") == 1);       // € cut after 2 of 3
    CHECK(utf8_complete_length("a\xE2\x82\xAC") == 4);   // € whole
    CHECK(utf8_complete_length("\xF0\x9F\x98") == 0);    // 😀 cut after 3 of 4
    CHECK(utf8_complete_length("\xF0\x9F\x98\x80") == 4);
    // Invalid bytes pass: nothing would ever complete them.
    CHECK(utf8_complete_length("a\xFF") == 2);
    CHECK(utf8_complete_length("a\x80\x80\x80\x80") == 5);
}
