#include <catch2/catch.hpp>

#include "core/hostlist.hpp"

using namespace banyan;

TEST_CASE("hostlist expands ranges, padding and products in order", "[hostlist]") {
    auto h = HostList::parse("node[1-4,7],login0");
    REQUIRE(h.ok());
    CHECK(*h == HostList{"node1", "node2", "node3", "node4", "node7", "login0"});

    CHECK(*HostList::parse("n[08-10]") == HostList{"n08", "n09", "n10"});
    CHECK(*HostList::parse("n[98-100]") == HostList{"n98", "n99", "n100"});
    CHECK(*HostList::parse("r[1-2]n[1-2]") == HostList{"r1n1", "r1n2", "r2n1", "r2n2"});
    CHECK(*HostList::parse("n[1-2]-ib") == HostList{"n1-ib", "n2-ib"});
    CHECK(*HostList::parse("a,b,a") == HostList{"a", "b", "a"});
    CHECK(HostList::parse("")->empty());
    CHECK(HostList::parse("node-0.cluster.local")->size() == 1);
}

TEST_CASE("hostlist formats the canonical compressed form", "[hostlist]") {
    struct Case {
        const char* in;
        const char* out;
    };
    for (auto c : std::vector<Case>{
             {"node1,node2,node3,node4,node7,login0", "node[1-4,7],login0"},
             {"node[1-4,7],login0", "node[1-4,7],login0"},
             {"n01,n02,n03", "n[01-03]"},
             {"n9,n10,n11", "n[9-11]"},
             {"n08,n09,n10", "n[08-10]"},
             {"n1,n01", "n1,n01"},
             {"n3,n1,n2", "n[3,1-2]"},
             {"a,b", "a,b"},
             {"solo5", "solo5"},
             {"x1,y1,x2", "x1,y1,x2"},
             {"n1-ib,n2-ib", "n1-ib,n2-ib"},
             {"123,124", "[123-124]"},
             {"r[1-2]n[1-2]", "r1n[1-2],r2n[1-2]"},
         }) {
        INFO(c.in);
        auto h = HostList::parse(c.in);
        REQUIRE(h.ok());
        CHECK(h->format() == c.out);
        // The output parses back to the same list.
        CHECK(*HostList::parse(h->format()) == *h);
    }
}

TEST_CASE("hostlist rejects malformed input with a clear error", "[hostlist][malformed]") {
    for (const char* bad : {",",
                            "a,",
                            ",a",
                            "a,,b",
                            "n[",
                            "n]",
                            "n[1-2",
                            "n1-2]",
                            "n[]",
                            "n[,1]",
                            "n[1,]",
                            "n[3-1]",
                            "n[a]",
                            "n[1-a]",
                            "n[-1]",
                            "n[[1]]",
                            "n[1-2]]",
                            "bad host",
                            "a/b",
                            "n[1 - 2]",
                            "n[0-9999999999999]",
                            "n[0-2000000]",
                            "a[0-1023]b[0-1023]c[0-3]",
                            "n[1.5]"}) {
        INFO(bad);
        auto h = HostList::parse(bad);
        REQUIRE(!h.ok());
        CHECK(h.error().message.find("hostlist '") == 0);
    }
}

TEST_CASE("hostlist finds a host's index (its rank)", "[hostlist]") {
    auto h = *HostList::parse("login,node[0-3]");
    CHECK(h.find("node2") == 3u);
    CHECK(h.find("login") == 0u);
    CHECK(!h.find("node4"));
}

TEST_CASE("hostlist honours a caller's cap on its size", "[hostlist]") {
    CHECK(HostList::parse("n[1-10]", 10).ok());
    auto r = HostList::parse("n[1-11]", 10);
    REQUIRE(!r.ok());
    CHECK(r.error().message == "hostlist 'n[1-11]': more than 10 hosts");
    CHECK(!HostList::parse("a[1-5]b[1-3]", 10).ok());
    CHECK(!HostList::parse("n[1-6],m[1-5]", 10).ok());
}
