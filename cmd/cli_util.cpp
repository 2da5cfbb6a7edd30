#include "cmd/cli_util.hpp"

namespace banyan::cli {

void fail(std::string message, int exit_code) {
    throw Failure{std::move(message), exit_code};
}

Client connect_to_instance() {
    return must(Client::connect());
}

}  // namespace banyan::cli
