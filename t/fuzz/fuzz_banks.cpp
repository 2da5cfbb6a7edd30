// Fuzzes the bank table a job manager is sent (job-manager.banks) and Fair
// Tree over it: any JSON reads as a table or one error, and any table,
// cycles, duplicate names and users of unknown banks among them, ranks
// every association with a factor in [0, 1] and loses none.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/json_parse.hpp"
#include "sched/banks.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto json = parse_json(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!json)
        return 0;
    auto table = BankTable::from_json(*json);
    if (!table)
        return 0;
    size_t banks = table->banks.size(), users = table->users.size();
    fair_tree(*table);
    if (table->banks.size() > banks || table->users.size() != users)
        std::abort();
    for (const auto& a : table->users)
        if (!(a.fairshare >= 0 && a.fairshare <= 1))
            std::abort();
    for (const auto& b : table->banks)
        (void)table->would_cycle(b.name, b.parent);
    auto again = BankTable::from_json(table->to_json());
    if (!again)
        std::abort();
    return 0;
}
