// Banks, Fair Tree and multi-factor priority (doc/spec/accounting.md
// §5-8): the factors each association gets from shares and usage, the
// priority they make, and the job manager's book of limits.
#include <catch2/catch.hpp>

#include "broker/job_manager/bank_book.hpp"
#include "broker/job_manager/job.hpp"
#include "sched/banks.hpp"
#include "sched/priority.hpp"

using namespace banyan;

namespace {

Association user(uint32_t userid, std::string bank, double usage, int64_t shares = 1) {
    Association a;
    a.userid = userid;
    a.bank = std::move(bank);
    a.usage = usage;
    a.shares = shares;
    return a;
}

double factor_of(const BankTable& t, uint32_t userid, const std::string& bank) {
    const Association* a = t.find_user(userid, bank);
    REQUIRE(a);
    return a->fairshare;
}

}  // namespace

TEST_CASE("Fair Tree ranks users by their usage against their shares, bank before user", "[priority]") {
    BankTable t;
    t.banks = {{"physics", "", 1, {}, 0}, {"chem", "", 1, {}, 0}};
    SECTION("with no usage at all, everyone is even") {
        t.users = {user(1, "physics", 0), user(2, "physics", 0), user(3, "chem", 0)};
        fair_tree(t);
        CHECK(factor_of(t, 1, "physics") == 1.0);
        CHECK(factor_of(t, 2, "physics") == 1.0);
        CHECK(factor_of(t, 3, "chem") == 1.0);
    }
    SECTION("within a bank, the one who used less comes first") {
        t.users = {user(1, "physics", 5000), user(2, "physics", 100), user(3, "chem", 0)};
        fair_tree(t);
        // chem used nothing: its user ranks first; in physics, 2 before 1.
        CHECK(factor_of(t, 3, "chem") == 1.0);
        CHECK(factor_of(t, 2, "physics") == Approx(2.0 / 3));
        CHECK(factor_of(t, 1, "physics") == Approx(1.0 / 3));
        CHECK(t.banks[0].name == "chem");  // the visit's order
        CHECK(t.find_bank("physics")->usage == 5100);
    }
    SECTION("no user of an over-served bank passes a user of an under-served one") {
        // physics used a lot (by one user); its light user still ranks
        // after chem's heavier one.
        t.users = {user(1, "physics", 100000), user(2, "physics", 10), user(3, "chem", 5000)};
        fair_tree(t);
        CHECK(factor_of(t, 3, "chem") > factor_of(t, 2, "physics"));
        CHECK(factor_of(t, 2, "physics") > factor_of(t, 1, "physics"));
    }
    SECTION("shares weigh usage: twice the shares may use twice as much") {
        t.banks[0].shares = 2;
        t.users = {user(1, "physics", 2000), user(3, "chem", 1000)};
        fair_tree(t);
        CHECK(factor_of(t, 1, "physics") == factor_of(t, 3, "chem"));
        t.users = {user(1, "physics", 2100), user(3, "chem", 1000)};
        fair_tree(t);
        CHECK(factor_of(t, 3, "chem") > factor_of(t, 1, "physics"));
    }
    SECTION("usage under a core-second counts as none: decayed away, even again") {
        t.users = {user(1, "physics", 0.4), user(3, "chem", 0.01)};
        fair_tree(t);
        CHECK(factor_of(t, 1, "physics") == factor_of(t, 3, "chem"));
    }
    SECTION("sub-banks: a subtree is ranked against its siblings as a whole") {
        t.banks.push_back({"theory", "physics", 1, {}, 0});
        t.users = {user(1, "theory", 0), user(2, "physics", 300), user(3, "chem", 200)};
        fair_tree(t);
        // physics (300) is over chem (200): chem's user first; inside
        // physics, theory (no usage) before user 2.
        CHECK(factor_of(t, 3, "chem") == 1.0);
        CHECK(factor_of(t, 1, "theory") == Approx(2.0 / 3));
        CHECK(factor_of(t, 2, "physics") == Approx(1.0 / 3));
    }
    SECTION("zero shares rank last; a user of an unknown bank gets 0") {
        t.banks[0].shares = 0;
        t.users = {user(1, "physics", 0), user(3, "chem", 10), user(4, "gone", 0)};
        fair_tree(t);
        CHECK(factor_of(t, 3, "chem") > factor_of(t, 1, "physics"));
        CHECK(factor_of(t, 4, "gone") == 0);
    }
}

TEST_CASE("bank tables: names, cycles, limits and their JSON", "[priority]") {
    CHECK(check_bank_name("physics-2.a_b"));
    CHECK_FALSE(check_bank_name(""));
    CHECK_FALSE(check_bank_name("-x"));
    CHECK_FALSE(check_bank_name("a b"));
    CHECK_FALSE(check_bank_name(std::string(65, 'a')));

    BankTable t;
    t.banks = {{"a", "", 1, {}, 0}, {"b", "a", 1, {}, 0}, {"c", "b", 1, {}, 0}};
    CHECK(t.would_cycle("a", "c"));
    CHECK(t.would_cycle("a", "a"));
    CHECK_FALSE(t.would_cycle("c", "a"));

    BankLimits limits;
    REQUIRE(limits.update({{"max-cores", 8}, {"max-running-jobs", 2}}, "limits"));
    CHECK(limits.max_cores == 8);
    auto bad = limits.update({{"max-cores", 4}, {"max-bogus", 1}}, "limits");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("limits.max-bogus: not a limit") != std::string::npos);
    CHECK(limits.max_cores == 8);  // nothing half-changed
    CHECK_FALSE(limits.update({{"max-cores", -1}}, "limits"));
    CHECK_FALSE(limits.update({{"max-cores", "8"}}, "limits"));

    t.users = {user(7, "b", 12)};
    t.users[0].limits = limits;
    auto back = BankTable::from_json(t.to_json());
    REQUIRE(back);
    CHECK(back->banks.size() == 3);
    CHECK(back->find_user(7, "b")->limits == limits);
    CHECK(back->find_bank("c")->parent == "b");
    CHECK_FALSE(BankTable::from_json({{"banks", {{{"name", 3}}}}}));
}

TEST_CASE("priority combines the weighted factors; urgency 0 holds and 31 expedites", "[priority]") {
    PrioritySettings s;
    PriorityFactors f;
    f.urgency = 16.0 / 31;
    CHECK(combine_priority(s, 0, f) == 0);
    CHECK(combine_priority(s, 31, f) == kExpeditePriority);
    int64_t base = combine_priority(s, 16, f);
    f.fairshare = 0.5;
    CHECK(combine_priority(s, 16, f) == base + 50000);
    f.age = 1;  // weight 0 by default: no change
    CHECK(combine_priority(s, 16, f) == base + 50000);
    s.weight_age = 1000;
    CHECK(combine_priority(s, 16, f) == base + 51000);
    f.fairshare = 7;  // out of range: taken as 1
    CHECK(combine_priority(s, 16, f) == base + 101000);
    s.weight_fairshare = s.weight_urgency = s.weight_age = s.weight_queue = s.weight_size = 1000000000;
    f = {1, 1, 1, 1, 1};
    CHECK(combine_priority(s, 30, f) == kExpeditePriority - 1);  // never expedite by weight

    auto config = Config::parse("[priority]\nweight-age = 5\nmax-age = \"1d\"\ndecay-half-life = \"2s\"\n", "t.toml");
    REQUIRE(config);
    auto read = PrioritySettings::read(*config);
    REQUIRE(read);
    CHECK(read->weight_age == 5);
    CHECK(read->max_age == 86400);
    CHECK(read->decay_half_life == 2);
    auto negative = Config::parse("[priority]\nweight-fairshare = -1\n", "t.toml");
    CHECK_FALSE(PrioritySettings::read(*negative));
    auto zero = Config::parse("[priority]\nrecalc-interval = 0\n", "t.toml");
    auto zero_read = PrioritySettings::read(*zero);
    REQUIRE_FALSE(zero_read);
    CHECK(zero_read.error().message == "t.toml: priority.recalc-interval: expected a duration above 0");
}

TEST_CASE("the job manager's bank book: who may use which bank, and limits", "[priority]") {
    BankBook book;
    CHECK(*book.resolve(1000, "", false) == "");  // no banks: as before
    CHECK(book.resolve(1000, "physics", false).error().message == "bank 'physics': this instance has no banks");

    BankTable t;
    t.banks = {{"top", "", 1, {}, 0}, {"physics", "top", 1, {}, 0}, {"chem", "top", 1, {}, 0}};
    t.banks[0].limits.max_cores = 6;
    t.users = {user(1000, "physics", 0), user(1000, "chem", 0), user(1001, "chem", 0)};
    t.users[1].is_default = true;
    t.users[0].limits.max_running_jobs = 2;
    book.set(t);

    CHECK(*book.resolve(1000, "", false) == "chem");
    CHECK(*book.resolve(1000, "physics", false) == "physics");
    auto not_theirs = book.resolve(1001, "physics", false);
    REQUIRE_FALSE(not_theirs);
    CHECK(not_theirs.error().message == "bank 'physics': uid 1001 may not use it (theirs: chem)");
    CHECK(book.resolve(1002, "", false).error().message.find("uid 1002 belongs to no bank") == 0);
    CHECK(*book.resolve(0, "", true) == "");  // the owner may go without
    CHECK(book.resolve(1000, "nope", false).error().message == "bank 'nope': no such bank");

    auto job = [](JobId id, uint32_t userid, std::string bank, uint64_t cores) {
        Job j;
        j.id = id;
        j.userid = userid;
        j.bank = std::move(bank);
        j.ncores = cores;
        j.priority = 100;
        j.t_submit = static_cast<double>(id);
        return j;
    };
    Job big = job(1, 1000, "physics", 8);
    CHECK(book.refused(big) == "bank 'top' max-cores 6 (the job alone is over it)");

    // Two running at most for uid 1000 in physics; 6 cores for all of top.
    Job a = job(2, 1000, "physics", 1), b = job(3, 1000, "physics", 1), c = job(4, 1000, "physics", 1);
    for (Job* j : {&a, &b}) {
        CHECK(book.over_running(*j).empty());
        book.charge(*j);
    }
    CHECK(book.over_running(c) == "limit: uid 1000 in bank 'physics' max-running-jobs 2");
    Job d = job(5, 1001, "chem", 5);
    CHECK(book.over_running(d) == "limit: bank 'top' max-cores 6");  // 2 of 6 held: 5 more is over
    Job e = job(6, 1001, "chem", 3);
    CHECK(book.over_running(e).empty());
    book.wait(c);
    book.wait(d);
    CHECK(book.waiting() == std::vector<JobId>{4, 5});
    CHECK(book.waiting("top") == std::vector<JobId>{4, 5});
    CHECK(book.waiting("elsewhere").empty());
    CHECK(book.uncharge(2) == "top");  // room made in top's tree
    CHECK_FALSE(book.uncharge(2));      // once
    CHECK(book.over_running(c).empty());
    CHECK(book.over_running(d).empty());  // 1 + 5 of 6
    book.unwait(4);
    CHECK(book.waiting() == std::vector<JobId>{5});

    // max-submit-jobs counts jobs not yet ended, per association.
    t.users[2].limits.max_submit_jobs = 1;
    book.set(t);
    Job f = job(7, 1001, "chem", 1), g = job(8, 1001, "chem", 1);
    CHECK(book.refused(f).empty());
    book.submitted(f);
    CHECK(book.refused(g) == "uid 1001 in bank 'chem': max-submit-jobs 1 reached (jobs submitted and not yet ended)");
    book.ended(f);
    CHECK(book.refused(g).empty());
    // A time limit is needed under max-run-core-minutes.
    t.banks[2].limits.max_run_core_minutes = 600;
    book.set(t);
    CHECK(book.refused(g) == "bank 'chem' has a max-run-core-minutes: a job needs a time limit (-t)");
    g.duration = 3600;
    CHECK(book.refused(g).empty());
}
