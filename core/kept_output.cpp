#include "core/kept_output.hpp"

#include <fmt/format.h>

namespace banyan {

bool KeptOutput::admit(nlohmann::json& output, std::string_view while_what) {
    if (lost_)
        return false;
    auto data = output.find("data");
    size_t bytes = data != output.end() && data->is_string() ? data->get_ref<const std::string&>().size() : 0;
    if (bytes_ + bytes > kLimit) {
        lost_ = true;
        output["stream"] = "stderr";
        output["data"] = fmt::format("banyan: output lost: more than {} bytes were written {}\n", kLimit, while_what);
        output.erase("encoding");
    }
    bytes_ += bytes;
    return true;
}

}  // namespace banyan
