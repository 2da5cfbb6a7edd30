#include <catch2/catch.hpp>

#include "core/tree.hpp"

using namespace banyan;

TEST_CASE("k-ary tree: parents, children, routes", "[tree]") {
    TreeShape t(8, 2);
    CHECK(!t.parent(0));
    CHECK(t.parent(7) == 3u);
    CHECK(t.children(0) == std::vector<uint32_t>{1, 2});
    CHECK(t.children(3) == std::vector<uint32_t>{7});
    CHECK(t.children(4).empty());
    CHECK(t.child_toward(0, 7) == 1u);
    CHECK(t.child_toward(1, 7) == 3u);
    CHECK(!t.child_toward(2, 7));
    CHECK(!t.child_toward(0, 8));
    CHECK(t.depth(7) == 3);
    auto d = t.descendants(1);
    std::sort(d.begin(), d.end());
    CHECK(d == std::vector<uint32_t>{3, 4, 7});
}

TEST_CASE("fanout 0 is a flat tree", "[tree]") {
    TreeShape t(5, 0);
    CHECK(t.children(0) == std::vector<uint32_t>{1, 2, 3, 4});
    CHECK(t.parent(4) == 0u);
    CHECK(t.children(2).empty());
    CHECK(t.child_toward(0, 3) == 3u);
    CHECK(t.depth(4) == 1);
}
