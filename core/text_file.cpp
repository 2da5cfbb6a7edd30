#include "core/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace banyan {

Result<std::string> read_text_file(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        return make_error(errno ? errno : ENOENT, fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace banyan
