#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "broker/exec/ended_shares.hpp"
#include "core/duration.hpp"
#include "core/text_file.hpp"

using namespace banyan;

namespace {

struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("banyan-ended-" + std::to_string(getpid()));
    Dir() {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~Dir() { std::filesystem::remove_all(path); }
    std::string file() const { return (path / "ended").string(); }
};

}  // namespace

TEST_CASE("ended shares are found by id, the latest of a repeated one, past thousands of others", "[exec]") {
    Dir dir;
    EndedShares ends(dir.file(), 300);
    CHECK(ends.find(1) == std::nullopt);
    for (JobId id = 1; id <= 5000; id++)
        ends.add({id, static_cast<int>(id % 7), 100.0 + static_cast<double>(id), id % 2 == 0}, {});
    REQUIRE(ends.find(1));
    CHECK(ends.find(1)->status == 1);
    CHECK(ends.find(4000)->time == 4100.0);
    CHECK(ends.find(4000)->started);
    CHECK(ends.find(5001) == std::nullopt);
    ends.add({3, 42, 1.0, false}, {{"job-manager.output", {{"id", 3}}}});  // run again: the latest counts
    CHECK(ends.find(3)->status == 42);
    auto kept = ends.take_kept(3);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].topic == "job-manager.output");
    CHECK(ends.take_kept(3).empty());  // sent once
}

TEST_CASE("ended shares outlive the process in their file, and expire", "[exec]") {
    Dir dir;
    double now = wall_now();
    {
        EndedShares ends(dir.file(), 300);
        ends.add({7, 3, now, true}, {});
        ends.add({8, 0, now, false}, {});
    }
    {
        std::ofstream old(dir.file(), std::ios::app);
        old << "9 1 " << std::fixed << now - 1000 << " 1\n"  // past the 300 s
            << "not a line\n";
    }
    EndedShares again(dir.file(), 300);  // a broker that started again
    REQUIRE(again.find(7));
    CHECK(again.find(7)->status == 3);
    CHECK(again.find(7)->started);
    CHECK(again.find(8));
    CHECK(again.find(9) == std::nullopt);
    auto text = read_text_file(dir.file());
    REQUIRE(text);
    // Written again with what it keeps, one line each.
    std::vector<std::string> ids;
    for (size_t at = 0; at < text->size();) {
        size_t end = text->find('\n', at);
        std::string line = text->substr(at, end - at);
        ids.push_back(line.substr(0, line.find(' ')));
        at = end == std::string::npos ? text->size() : end + 1;
    }
    CHECK(ids == std::vector<std::string>{"7", "8"});

    // Kept no longer than asked: what a short keep drops goes on the next add.
    EndedShares brief((dir.path / "brief").string(), 0.05);
    for (JobId id = 1; id <= 3000; id++)
        brief.add({id, 0, now, true}, {{"t", {}}});
    usleep(100000);
    brief.add({4000, 0, wall_now(), true}, {});
    CHECK(brief.find(1) == std::nullopt);
    CHECK(brief.find(2999) == std::nullopt);
    CHECK(brief.take_kept(2999).empty());
    CHECK(brief.find(4000));
    // A job run again here: the first end's expiry leaves the second's messages.
    EndedShares second((dir.path / "second").string(), 1.0);
    second.add({5000, 1, wall_now(), true}, {{"first", {}}});
    usleep(600000);
    second.add({5000, 2, wall_now(), true}, {{"second", {}}});
    usleep(600000);
    second.add({5001, 0, wall_now(), true}, {});  // the first has expired, not the second
    CHECK(second.find(5000)->status == 2);
    auto kept = second.take_kept(5000);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].topic == "second");
}
