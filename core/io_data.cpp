#include "core/io_data.hpp"

#include <cerrno>

#include <fmt/format.h>

#include "core/base64.hpp"
#include "core/text.hpp"

namespace banyan {

void put_io_data(nlohmann::json& message, std::string_view bytes) {
    if (is_valid_utf8(bytes)) {
        message["data"] = bytes;
        return;
    }
    message["data"] = base64_encode(bytes);
    message["encoding"] = "base64";
}

Result<std::string> io_data(const nlohmann::json& message, std::string_view context) {
    auto data = message.find("data");
    if (data == message.end() || !data->is_string())
        return make_error(EPROTO, fmt::format("{}.data: expected a string", context));
    auto encoding = message.find("encoding");
    if (encoding == message.end())
        return data->get<std::string>();
    if (*encoding != "base64")
        return make_error(EPROTO, fmt::format("{}.encoding: expected base64", context));
    auto bytes = base64_decode(data->get_ref<const std::string&>());
    if (!bytes)
        return make_error(EPROTO, fmt::format("{}.data: {}", context, bytes.error().message));
    return bytes;
}

}  // namespace banyan
