#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>

#include "broker/job_manager/job.hpp"
#include "broker/job_manager/job_db.hpp"

using namespace banyan;

namespace {

nlohmann::json jobspec_with(nlohmann::json system) {
    return {{"version", 1},
            {"resources", {{{"type", "node"}, {"count", 2}, {"with", {{{"type", "slot"}, {"count", 4}, {"label", "task"}, {"with", {{{"type", "core"}, {"count", 1}}}}}}}}}},
            {"tasks", {{{"command", {"/bin/app", "-x"}}, {"slot", "task"}, {"count", {{"per_slot", 1}}}}}},
            {"attributes", {{"system", system}}}};
}

JobEvent ev(std::string name, nlohmann::json context = nlohmann::json::object()) {
    return {1000, std::move(name), std::move(context)};
}

const nlohmann::json kR = {{"version", 1},
                           {"execution",
                            {{"R_lite", {{{"rank", "0-1"}, {"children", {{"core", "0-3"}}}}}},
                             {"nodelist", {"n[0-1]"}},
                             {"starttime", 0},
                             {"expiration", 0}}}};

}  // namespace

TEST_CASE("a job reads its name, counts, duration and dependencies from the jobspec", "[job]") {
    Job job;
    REQUIRE(job.read_jobspec(jobspec_with({{"duration", 60},
                                           {"dependencies", {{{"scheme", "afterok"}, {"value", "f21"}}}}}))
                .ok());
    CHECK(job.name == "app");
    CHECK(job.ntasks == 8);
    CHECK(job.nnodes == 2);
    CHECK(job.duration == 60);
    REQUIRE(job.dependencies.size() == 1);
    CHECK(job.dependencies[0].scheme == "afterok");
    CHECK(job.dependencies[0].target == 58);
    CHECK(job.sched_jobspec.find("environment") == std::string::npos);

    Job bad;
    auto r = bad.read_jobspec(jobspec_with({{"dependencies", {{{"scheme", "before"}, {"value", "f21"}}}}}));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("dependencies[0].scheme: before") != std::string::npos);
    auto r2 = bad.read_jobspec(jobspec_with({{"dependencies", {{{"scheme", "afterok"}, {"value", "fl0"}}}}}));
    REQUIRE_FALSE(r2.ok());
    CHECK(r2.error().message.find("dependencies[0].value") != std::string::npos);
}

TEST_CASE("a job reads its mail request and its singleton dependency", "[job][mail]") {
    Job job;
    REQUIRE(job.read_jobspec(jobspec_with({{"mail", {{"type", "begin,FAIL"}, {"user", "a@b"}}},
                                           {"dependencies", {{{"scheme", "singleton"}, {"value", ""}}}}}))
                .ok());
    REQUIRE(job.mail);
    CHECK(job.mail->events == (kMailBegin | kMailFail));
    CHECK(job.mail->user == "a@b");
    CHECK(job.singleton);
    CHECK(job.dependencies.empty());

    Job none;
    REQUIRE(none.read_jobspec(jobspec_with({{"mail", {{"type", "NONE"}}}})).ok());
    CHECK_FALSE(none.mail);  // nothing to send: nothing kept
    Job all;
    REQUIRE(all.read_jobspec(jobspec_with({{"mail", {{"type", "ALL"}}}})).ok());
    CHECK(all.mail->events == (kMailBegin | kMailEnd | kMailFail | kMailRequeue | kMailInvalidDepend));

    // Refused at submit; a job stored before reads back, without mail.
    nlohmann::json bad_type = {{"mail", {{"type", "END,TIME_LIMIT"}}}};
    auto r = read_mail_request(bad_type);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "mail.type: TIME_LIMIT: expected NONE, BEGIN, END, FAIL, REQUEUE, INVALID_DEPEND, "
                               "ARRAY_TASKS or ALL");
    Job stored;
    REQUIRE(stored.read_jobspec(jobspec_with(bad_type)).ok());
    CHECK_FALSE(stored.mail);
    CHECK(stored.name == "app");
    auto r2 = read_mail_request({{"mail", {{"type", "END"}, {"user", "x\nBcc: y"}}}});
    REQUIRE_FALSE(r2.ok());
    CHECK(r2.error().message == "mail.user: not an address");
    CHECK_FALSE(read_mail_request({{"mail", {{"type", 3}}}}).ok());
}

TEST_CASE("events drive the states; results follow from them", "[job]") {
    Job job;
    apply_event(job, ev("submit", {{"userid", 5}, {"urgency", 20}, {"bank", "chem"}}));
    CHECK(job.state == JobState::depend);
    CHECK(job.userid == 5);
    CHECK(job.urgency == 20);
    CHECK(job.bank == "chem");
    apply_event(job, ev("urgency", {{"userid", 5}, {"urgency", 12}}));
    CHECK(job.urgency == 12);
    CHECK(job.bank == "chem");  // a change of urgency keeps the bank
    apply_event(job, ev("urgency", {{"userid", 5}, {"urgency", 20}}));
    apply_event(job, ev("depend"));
    CHECK(job.state == JobState::priority);
    apply_event(job, ev("priority", {{"priority", 20}}));
    CHECK(job.state == JobState::sched);
    job.sched_jobspec = std::string(300, 'x');  // what the scheduler needs, while pending
    apply_event(job, ev("alloc", {{"R", kR}}));
    CHECK(job.state == JobState::run);
    CHECK(job.sched_jobspec.capacity() < 300);  // its memory is given back, not kept by a job that runs
    CHECK(job.ranks == std::vector<uint32_t>{0, 1});
    CHECK(job.nodelist == "n[0-1]");
    apply_event(job, ev("start"));
    apply_event(job, ev("finish", {{"status", 0}}));
    CHECK(job.state == JobState::cleanup);
    CHECK(job.result().empty());
    apply_event(job, ev("free"));
    apply_event(job, ev("clean"));
    CHECK(job.state == JobState::inactive);
    CHECK(job.result() == "completed");
    CHECK(job.next_event_seq == 10);
    CHECK(job.summary()["result"] == "completed");

    Job canceled;
    apply_event(canceled, ev("submit"));
    canceled.sched_jobspec = std::string(300, 'x');
    apply_event(canceled, ev("exception", {{"type", "cancel"}, {"severity", 0}, {"note", "by me"}}));
    CHECK(canceled.state == JobState::cleanup);
    CHECK(canceled.sched_jobspec.capacity() < 300);
    apply_event(canceled, ev("exception", {{"type", "timeout"}, {"severity", 0}}));  // the first one counts
    apply_event(canceled, ev("clean"));
    CHECK(canceled.result() == "canceled");
    CHECK(canceled.summary()["exception"]["note"] == "by me");

    Job minor;
    apply_event(minor, ev("submit"));
    apply_event(minor, ev("exception", {{"type", "note"}, {"severity", 3}}));
    CHECK(minor.state == JobState::depend);  // severity > 0 is recorded only
    apply_event(minor, ev("something-new"));  // unknown events change nothing
    CHECK(minor.state == JobState::depend);

    Job killed;  // canceled while running: the status still arrives
    for (auto e : {ev("submit"), ev("depend"), ev("priority", {{"priority", 16}}), ev("alloc", {{"R", kR}}),
                   ev("start"), ev("exception", {{"type", "timeout"}, {"severity", 0}}), ev("finish", {{"status", 143}}),
                   ev("free"), ev("clean")})
        apply_event(killed, e);
    CHECK(killed.result() == "timeout");
    CHECK(killed.status == 143);
}

TEST_CASE("an array's indexes to make follow its events; an element's jobspec is the array's", "[job][array]") {
    Job array;
    REQUIRE(array.read_jobspec(jobspec_with({{"array", "1-3,7,9-20:5%2"}})));
    REQUIRE(array.array);
    JobArray& a = *array.array;
    CHECK(a.size == 7);  // 1 2 3 7 9 14 19
    CHECK(a.throttle == 2);
    CHECK(a.next_to_make() == 1u);
    apply_event(array, ev("submit", {{"userid", 5}}));
    apply_event(array, ev("element", {{"index", 1}, {"id", 100}}));
    apply_event(array, ev("element-canceled", {{"index", 2}}));
    CHECK(a.next_to_make() == 3u);
    apply_event(array, ev("element", {{"index", 3}, {"id", 101}}));
    CHECK(a.next_to_make() == 7u);
    CHECK(a.to_make().format() == "7,9,14,19");
    apply_event(array, ev("element-canceled", {{"index", 14}}));
    CHECK(a.to_make().format() == "7,9,19");
    apply_event(array, ev("element-end", {{"index", 3}, {"note", "fA[3] failed (exit 1)"}}));
    apply_event(array, ev("element-end", {{"index", 1}, {"note", "later"}}));
    CHECK(a.not_ok.count() == 2);
    CHECK(a.first_not_ok == "fA[3] failed (exit 1)");
    // Requeued, a failed element counts again by its next end.
    apply_event(array, ev("element-requeued", {{"index", 3}}));
    CHECK(a.not_ok.format() == "1");
    apply_event(array, ev("element-end", {{"index", 3}, {"note", "again"}}));
    for (uint32_t i : {7u, 9u, 19u})
        apply_event(array, ev("element", {{"index", i}, {"id", 102 + i}}));
    CHECK(a.made == 5);
    CHECK(!a.next_to_make());
    CHECK(a.to_make().empty());
    apply_event(array, ev("update", {{"throttle", 4}}));
    CHECK(a.throttle == 4);
    apply_event(array, ev("depend"));
    apply_event(array, ev("priority", {{"priority", 10}}));
    CHECK(array.state == JobState::sched);
    apply_event(array, ev("array-end", {{"status", 1}}));
    CHECK(array.state == JobState::inactive);
    CHECK(array.result() == "failed");

    // An element: the same jobspec, with dependencies and the array of its
    // own dropped once its submit event says what it is.
    Job element;
    REQUIRE(element.read_jobspec(
        jobspec_with({{"array", "1-3"}, {"dependencies", {{{"scheme", "afterok"}, {"value", "f2Ubq7dL[2]"}}}}})));
    CHECK(element.dependencies.at(0).index == 2u);
    apply_event(element, ev("submit", {{"userid", 5},
                                       {"array_of", {{"id", 77}, {"index", 2}, {"size", 3}, {"t_submit", 500.0}}}}));
    CHECK(!element.array);
    CHECK(element.dependencies.empty());
    CHECK(element.array_id == 77);
    CHECK(element.array_index == 2);
    CHECK(element.array_size == 3);
    CHECK(element.t_submit == 500.0);
    CHECK(element.summary()["array_of"] == nlohmann::json{{"id", 77}, {"index", 2}});
    // Read again for a requeue: still an element, not an array.
    element.reread_jobspec(jobspec_with({{"array", "1-3"}}), NamedQueues{});
    CHECK(!element.array);

    Job bad;
    auto refused = bad.read_jobspec(jobspec_with({{"array", "9-1"}}));
    REQUIRE(!refused);
    CHECK(refused.error().message == "attributes.system.array: '9-1': the range '9-1' is reversed");
}

TEST_CASE("the job database commits in groups and reads back what it stored", "[jobdb]") {
    auto dir = std::filesystem::temp_directory_path() / ("banyan-jobdb-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    Reactor reactor;
    auto events_of = [](JobDb& d, JobId id, uint32_t from) {
        return d.read_now([=](JobDbReader& r) { return r.events(id, from); });
    };
    {
        auto db = JobDb::open(reactor, dir.string());
        REQUIRE(db.ok());
        JobDb& d = **db;
        for (JobId id = 1; id <= 100; id++) {
            d.add_job(id, 7, 1000.5, R"({"version":1})");
            d.add_event(id, 0, ev("submit", {{"userid", 7}}));
            d.add_event(id, 1, ev("depend"));
        }
        d.add_output(3, {0, 1, "stdout", std::string("a\0b", 3)});
        bool committed = false;
        d.after_commit([&] {
            committed = true;
            reactor.stop();
        });
        CHECK_FALSE(committed);
        CHECK(events_of(d, 1, 0)->empty());  // nothing on disk yet
        reactor.run_for(std::chrono::seconds(10));
        CHECK(committed);
        CHECK(d.commits() == 1);  // 301 writes, one transaction
        CHECK(events_of(d, 1, 0)->size() == 2);
        CHECK(events_of(d, 1, 1)->at(0).name == "depend");
        CHECK(d.read_now([](JobDbReader& r) { return r.output(3, 0); })->at(0).data == std::string("a\0b", 3));
        CHECK(*d.read_now([](JobDbReader& r) { return r.jobspec(5); }) == R"({"version":1})");
        CHECK(d.read_now([](JobDbReader& r) { return r.jobspec(500); }).error().code == ENOENT);

        // A read answers on the loop, never inside the call.
        std::optional<size_t> read_events;
        bool second = false;
        d.read([](JobDbReader& r) { return r.events(2, 0); },
               [&](const Result<std::vector<JobEvent>>& e) {
                   read_events = e ? e->size() : 0;
                   if (second)
                       reactor.stop();
               });
        CHECK_FALSE(read_events);
        d.add_event(2, 2, ev("priority"));
        d.after_commit([&] {
            second = true;
            if (read_events)
                reactor.stop();
        });
        reactor.run_for(std::chrono::seconds(10));
        REQUIRE(read_events);
        CHECK((*read_events == 2 || *read_events == 3));  // the reader and the writer race
        CHECK(second);
        CHECK(d.commits() == 2);
        d.remove_job(100);
    }  // closing commits what is queued
    // Reopened: everything is there but the removed job, and the largest id
    // issued is remembered after its job is gone.
    auto db = JobDb::open(reactor, dir.string());
    REQUIRE(db.ok());
    auto all = (*db)->read_now([](JobDbReader& r) { return r.load_all(); });
    REQUIRE(all.ok());
    CHECK(all->size() == 99);
    CHECK(all->front().userid == 7);
    CHECK(all->front().events.size() == 2);
    CHECK(all->at(1).events.size() == 3);
    CHECK(all->at(2).next_output_seq == 1);  // job 3: output goes on after what is stored
    CHECK(all->at(2).output_bytes == 3);
    CHECK(all->at(0).next_output_seq == 0);
    CHECK(*(*db)->read_now([](JobDbReader& r) { return r.max_id(); }) == 100);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the job database names its file when it cannot open", "[jobdb]") {
    Reactor reactor;
    auto db = JobDb::open(reactor, "/nonexistent/dir");
    REQUIRE_FALSE(db.ok());
    CHECK(db.error().message.find("/nonexistent/dir/jobs.db") != std::string::npos);
}
