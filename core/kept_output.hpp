// KeptOutput: a bound on the task output a job keeps while its way out is
// gone (doc/spec/shell.md §8): the shell's while its broker is away, the
// exec service's while rank 0 cannot be reached. Each keeps at most
// kLimit bytes of output data; the first message past it becomes one
// notice on stderr, and the rest is dropped. Other messages are not its
// business: they are always kept.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace banyan {

class KeptOutput {
  public:
    static constexpr size_t kLimit = size_t{1} << 20;

    // For one output message (`data`, `stream`, and maybe `encoding`):
    // true to keep it as it is, or rewritten into the notice "banyan:
    // output lost: more than kLimit bytes were written WHILE" when it is
    // the first past the limit; false to drop it.
    bool admit(nlohmann::json& output, std::string_view while_what);
    // Past the limit: the notice was made (the rest is dropped).
    bool lost() const { return lost_; }
    // What was kept has gone out: a new budget.
    void reset() { *this = KeptOutput(); }

  private:
    size_t bytes_ = 0;
    bool lost_ = false;
};

}  // namespace banyan
