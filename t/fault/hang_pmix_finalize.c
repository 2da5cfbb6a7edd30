/* hang_pmix_finalize: an LD_PRELOAD shim whose PMIx_server_finalize never
 * returns, as the library's did in a shell after a cancel: the shell must
 * bound its wait for it (doc/spec/shell.md §4.3). */
#include <unistd.h>

int PMIx_server_finalize(void) {
    for (;;)
        pause();
    return 0;
}
