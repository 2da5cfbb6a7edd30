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
    // Written again with what it keeps, one line each, after the line
    // that says since when.
    std::vector<std::string> ids;
    for (size_t at = 0; at < text->size();) {
        size_t end = text->find('\n', at);
        std::string line = text->substr(at, end - at);
        ids.push_back(line.substr(0, line.find(' ')));
        at = end == std::string::npos ? text->size() : end + 1;
    }
    CHECK(ids == std::vector<std::string>{"since", "7", "8"});

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

TEST_CASE("shares let start are kept with their run, in the file too, and expire", "[exec]") {
    Dir dir;
    double now = wall_now();
    // An alloc's time with more digits than a fixed format keeps: the run
    // is named by it exactly.
    double run = now - 0.123456789;
    double began = 0;
    {
        EndedShares shares(dir.file(), 300);
        began = shares.records_since();
        CHECK(began >= now);  // a new file: it knows of nothing before
        CHECK_FALSE(shares.was_let_go(7, run));
        shares.let_go(7, run);
        shares.let_go(8, 0);  // from a rank 0 that names no run
        shares.add({9, 0, now, true, {}, run}, {});
        CHECK(shares.was_let_go(7, run));
        CHECK_FALSE(shares.was_let_go(7, run + 1));  // another run of job 7
        CHECK(shares.was_let_go(8, run));            // not named: taken as any run
        CHECK_FALSE(shares.was_let_go(9, run));      // an end is not a start
    }
    {
        std::ofstream old(dir.file(), std::ios::app);
        old << "10 go " << std::fixed << now - 1000 << " 5\n";  // past the 300 s
    }
    EndedShares again(dir.file(), 300);                          // a broker that started again
    CHECK(again.records_since() == Approx(began).margin(1e-5));  // its records go on
    CHECK(again.was_let_go(7, run));
    CHECK_FALSE(again.was_let_go(7, run + 1e-6));
    CHECK(again.was_let_go(8, 1));
    CHECK_FALSE(again.was_let_go(10, 5));
    REQUIRE(again.find(9));
    CHECK(again.find(9)->alloc == run);  // read back whole
    CHECK(again.find(7) == std::nullopt);
    // Kept no longer than ends are.
    EndedShares brief((dir.path / "brief").string(), 0.05);
    brief.let_go(11, run);
    usleep(100000);
    brief.let_go(12, run);
    CHECK_FALSE(brief.was_let_go(11, run));
    CHECK(brief.was_let_go(12, run));
}

TEST_CASE("records of another boot, or rewritten by an older broker, begin anew", "[exec]") {
    Dir dir;
    double past = wall_now() - 100;
    {
        std::ofstream other(dir.file());
        other << "since " << std::fixed << past << " not-this-boot\n7 go " << past + 1 << " 5\n";
    }
    double before = wall_now();
    EndedShares rebooted(dir.file(), 300);
    CHECK(rebooted.records_since() >= before);
    CHECK(rebooted.was_let_go(7, 5));  // still said: it may have run
    {
        std::ofstream older(dir.file());  // what an older broker leaves: ends alone
        older << "9 0 " << std::fixed << past << " 1\n";
    }
    EndedShares after_older(dir.file(), 300);
    CHECK(after_older.records_since() >= before);
}
