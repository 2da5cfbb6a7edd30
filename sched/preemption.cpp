#include "sched/preemption.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace banyan {

std::vector<uint64_t> choose_victims(Matcher& matcher, const Jobspec& job,
                                     std::vector<PreemptionCandidate> candidates, int64_t now) {
    struct Held {
        uint64_t id;
        int64_t tier, start;
        size_t size;
    };
    std::vector<Held> order;
    for (const auto& c : candidates)
        if (const Matcher::Job* held = matcher.job(c.id); held && !held->reserved)
            order.push_back({c.id, c.tier, held->start, held->claims.size()});
    // Lowest tier, then latest start (the least work lost; starts are whole
    // seconds: of two in one second, the later id), then smallest.
    std::sort(order.begin(), order.end(), [](const Held& a, const Held& b) {
        return std::tuple(a.tier, -a.start, a.size, ~a.id) < std::tuple(b.tier, -b.start, b.size, ~b.id);
    });
    // A test only: it starts in a pass, once they are gone.
    auto fits = [&] { return matcher.fits_now(job, now); };
    // Taken out one at a time until the job fits...
    std::vector<std::pair<uint64_t, Allocation>> out;
    bool fit = false;
    for (const Held& h : order) {
        out.emplace_back(h.id, *matcher.job(h.id));
        (void)matcher.cancel(h.id);
        if ((fit = fits()))
            break;
    }
    // ... then, from the last but one back, each it fits without is spared.
    std::vector<bool> needed(out.size(), fit);
    for (size_t j = out.size() - 1; fit && j-- > 0;) {
        (void)matcher.put_back(out[j].first, out[j].second);
        if (fits())
            needed[j] = false;
        else
            (void)matcher.cancel(out[j].first);
    }
    std::vector<uint64_t> victims;
    for (size_t i = 0; i < out.size(); ++i) {
        if (!matcher.job(out[i].first))
            (void)matcher.put_back(out[i].first, std::move(out[i].second));
        if (needed[i])
            victims.push_back(out[i].first);
    }
    return victims;
}

}  // namespace banyan
