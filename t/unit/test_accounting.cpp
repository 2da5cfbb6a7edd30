// The accounting store (doc/spec/accounting.md §3): records committed
// together, an id stored once, histories by filter; and the record's
// checks of what the job manager sends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <fcntl.h>

#include <unistd.h>

#include "broker/accounting/accounting_db.hpp"

using namespace banyan;

namespace {

UsageRecord record(uint64_t id, uint32_t userid, double end, std::string result = "completed") {
    UsageRecord r;
    r.id = id;
    r.userid = userid;
    r.name = "job" + std::to_string(id);
    r.result = std::move(result);
    r.status = 0;
    r.t_submit = end - 10;
    r.t_start = end - 5;
    r.t_end = end;
    r.nnodes = 1;
    r.ncores = 2;
    r.ngpus = 1;
    r.cpu = 9.5;
    r.maxrss = 1 << 20;
    r.totalrss = 1 << 20;
    return r;
}

// Runs the loop until `done` is set, at most 10 s.
void run_until(Reactor& reactor, const bool& done) {
    Timer poll(reactor);
    poll.start_repeating(std::chrono::milliseconds(1), [&] {
        if (done)
            reactor.stop();
    });
    reactor.run_for(std::chrono::seconds(10));
}

std::vector<uint64_t> ids_of(AccountingDb& db, Reactor& reactor, HistoryFilter filter) {
    std::vector<uint64_t> ids;
    bool done = false;
    db.history(std::move(filter), [&](Result<std::vector<UsageRecord>> found) {
        REQUIRE(found.ok());
        for (const auto& r : *found)
            ids.push_back(r.id);
        done = true;
    });
    run_until(reactor, done);
    REQUIRE(done);
    return ids;
}

}  // namespace

TEST_CASE("accounting: records are stored once, and read back by user, time and result", "[accounting]") {
    auto dir = std::filesystem::temp_directory_path() / ("banyan-accounting-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    Reactor reactor;
    {
        auto db = AccountingDb::open(reactor, dir.string());
        REQUIRE(db.ok());
        bool first = false, second = false;
        std::unordered_set<uint64_t> stored_first, stored_second;
        (*db)->add({record(1, 7, 100), record(2, 7, 200, "failed"), record(3, 8, 300)},
                   [&](const std::unordered_set<uint64_t>& stored) {
                       first = true;
                       stored_first = stored;
                   });
        CHECK_FALSE(first);  // never inside the call
        auto again = record(1, 7, 100);
        again.name = "changed";
        (*db)->add({again, record(4, 7, 400, "timeout")}, [&](const std::unordered_set<uint64_t>& stored) {
            second = true;
            stored_second = stored;
        });
        run_until(reactor, second);
        CHECK(first);
        CHECK(second);
        // The answer says which were new: id 1 again is not (its usage is
        // not counted twice).
        CHECK(stored_first == std::unordered_set<uint64_t>{1, 2, 3});
        CHECK(stored_second == std::unordered_set<uint64_t>{4});
        CHECK(ids_of(**db, reactor, {}) == std::vector<uint64_t>{4, 3, 2, 1});  // newest end first
        CHECK(ids_of(**db, reactor, {.userid = 7}) == std::vector<uint64_t>{4, 2, 1});
        CHECK(ids_of(**db, reactor, {.userid = 7, .since = 200, .until = 400}) == std::vector<uint64_t>{2});
        CHECK(ids_of(**db, reactor, {.results = {"failed", "timeout"}}) == std::vector<uint64_t>{4, 2});
        CHECK(ids_of(**db, reactor, {.name = "job3"}) == std::vector<uint64_t>{3});
        CHECK(ids_of(**db, reactor, {.count = 2}) == std::vector<uint64_t>{4, 3});
    }
    // Reopened: all there, the first record of id 1 kept as it was.
    auto db = AccountingDb::open(reactor, dir.string());
    REQUIRE(db.ok());
    bool done = false;
    (*db)->history({.name = "job1"}, [&](Result<std::vector<UsageRecord>> found) {
        REQUIRE(found.ok());
        REQUIRE(found->size() == 1);
        const UsageRecord& r = found->front();
        CHECK(r.to_json() == record(1, 7, 100).to_json());
        CHECK(r.elapsed() == 5);
        CHECK(r.gpu_seconds() == 5);
        done = true;
    });
    run_until(reactor, done);
    CHECK(done);
    std::filesystem::remove_all(dir);
}

TEST_CASE("accounting: a record from the job manager is checked column by column", "[accounting]") {
    auto good = record(5, 7, 100).to_row();
    REQUIRE(good.size() == UsageRecord::kRowColumns.size());
    auto r = UsageRecord::from_row(good);
    REQUIRE(r.ok());
    CHECK(r->to_json() == record(5, 7, 100).to_json());
    auto column = [](std::string_view name) {
        auto& names = UsageRecord::kRowColumns;
        return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    };
    auto no_status = good;
    no_status[column("status")] = nullptr;
    CHECK_FALSE(UsageRecord::from_row(no_status)->status);
    auto wrong = good;
    wrong[column("cpu")] = "lots";
    CHECK(UsageRecord::from_row(wrong).error().message == "record.cpu: expected a number");
    wrong = good;
    wrong[column("status")] = "zero";
    CHECK(UsageRecord::from_row(wrong).error().message == "record.status: expected an integer");
    wrong = good;
    wrong[column("result")] = "fine";
    CHECK(UsageRecord::from_row(wrong).error().message ==
          "record.result: expected completed, failed, canceled or timeout");
    wrong = good;
    wrong[column("id")] = 0;
    CHECK(UsageRecord::from_row(wrong).error().message == "record.id: expected a job id");
    wrong = good;
    wrong.erase(wrong.size() - 1);
    CHECK(UsageRecord::from_row(wrong).error().message == "a record: expected an array of 20 values");
    CHECK(UsageRecord::from_row(nlohmann::json::object()).error().message ==
          "a record: expected an array of 20 values");
}

TEST_CASE("accounting: a store of another program is refused before anything is written", "[accounting]") {
    auto dir = std::filesystem::temp_directory_path() / ("banyan-accounting-other-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    {
        auto other = Database::open((dir / "accounting.db").string(), "theirs");
        REQUIRE(other.ok());
        REQUIRE(other->exec("CREATE TABLE theirs (x INTEGER)").ok());
    }
    Reactor reactor;
    auto db = AccountingDb::open(reactor, dir.string());
    REQUIRE_FALSE(db.ok());
    CHECK(db.error().message.find("accounting.db") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("accounting: every descriptor of the store is close-on-exec", "[accounting]") {
    // The file, its -wal and -shm, opened inside sqlite: a job the broker
    // starts must inherit none of them (DESIGN.md, Security).
    auto dir = std::filesystem::temp_directory_path() / ("banyan-accounting-fds-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    Reactor reactor;
    auto db = AccountingDb::open(reactor, dir.string());
    REQUIRE(db.ok());
    bool stored = false;
    (*db)->add({record(1, 7, 100)}, [&](const std::unordered_set<uint64_t>&) { stored = true; });
    run_until(reactor, stored);
    REQUIRE(stored);
    size_t seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(entry.path(), ec);
        if (ec || target.parent_path() != dir)
            continue;
        int fd = std::stoi(entry.path().filename().string());
        INFO(target.string());
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
        ++seen;
    }
    CHECK(seen >= 3);  // the file for each of the two connections, and the -wal
    db->reset();
    std::filesystem::remove_all(dir);
}
