// pmix_barrier: the exception barrier of every callback the PMIx library
// makes into the shell. PMIx calls the server module from its own thread,
// with C code above us: nothing may throw back into it, and an allocation
// can fail in any callback.
#pragma once

#include <new>

#include <pmix_common.h>

namespace banyan {

// fn()'s status; PMIX_ERR_OUT_OF_RESOURCE if it ran out of memory,
// PMIX_ERROR if it threw anything else.
template <class Fn>
pmix_status_t pmix_barrier(Fn&& fn) noexcept {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return PMIX_ERR_OUT_OF_RESOURCE;
    } catch (...) {
        return PMIX_ERROR;
    }
}

}  // namespace banyan
