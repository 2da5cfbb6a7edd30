#include <catch2/catch.hpp>

#include <string>

#include "core/kept_output.hpp"

using namespace banyan;

namespace {

nlohmann::json output(size_t bytes) {
    return {{"type", "output"}, {"stream", "stdout"}, {"data", std::string(bytes, 'x')}, {"encoding", "utf-8"}};
}

}  // namespace

TEST_CASE("kept output: up to the limit is kept as it is, the first past it becomes one notice, the rest dropped",
          "[kept_output]") {
    KeptOutput kept;
    auto half = output(KeptOutput::kLimit / 2);
    REQUIRE(kept.admit(half, "while away"));
    CHECK(half == output(KeptOutput::kLimit / 2));
    auto rest = output(KeptOutput::kLimit / 2);
    REQUIRE(kept.admit(rest, "while away"));
    CHECK(rest["stream"] == "stdout");
    auto over = output(1);
    REQUIRE(kept.admit(over, "while away"));
    CHECK(over["stream"] == "stderr");
    CHECK(over["data"] == "banyan: output lost: more than 1048576 bytes were written while away\n");
    CHECK_FALSE(over.contains("encoding"));
    auto later = output(1);
    CHECK_FALSE(kept.admit(later, "while away"));
    kept.reset();
    CHECK(kept.admit(later, "while away"));
    CHECK(later == output(1));
}

TEST_CASE("kept output: a message without string data counts nothing", "[kept_output]") {
    KeptOutput kept;
    auto big = output(KeptOutput::kLimit);
    REQUIRE(kept.admit(big, "while away"));
    nlohmann::json eof{{"type", "output"}, {"stream", "stdout"}, {"eof", true}};
    REQUIRE(kept.admit(eof, "while away"));
    CHECK_FALSE(eof.contains("data"));
}
