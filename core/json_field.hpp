// json_field: the one way to read an optional field of untrusted JSON
// (json_as: of a value found otherwise, as an element of an array).
// nlohmann's value(key, default) throws when the field has another type;
// this returns the fallback when the field is absent and an Error naming
// PATH.KEY and the type expected when it is present with another type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace banyan {

// The object at PATH ("attributes", "system", ...) inside `object`, or an
// empty object when any step is missing or not an object. A reference, not
// a copy: jobspecs carry environments of kilobytes.
inline const nlohmann::json& json_object_at(const nlohmann::json& object,
                                            std::initializer_list<std::string_view> path) {
    static const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json* at = &object;
    for (std::string_view key : path) {
        if (!at->is_object())
            return empty;
        auto it = at->find(key);
        if (it == at->end() || !it->is_object())
            return empty;
        at = &*it;
    }
    return *at;
}

// The array at `key` of `object`, or an empty array when it is missing or
// not an array: a reference, as json_object_at.
inline const nlohmann::json& json_array_at(const nlohmann::json& object, std::string_view key) {
    static const nlohmann::json empty = nlohmann::json::array();
    if (!object.is_object())
        return empty;
    auto it = object.find(key);
    return it == object.end() || !it->is_array() ? empty : *it;
}

namespace detail {
// V as a T, or an Error naming it (NAMED(): the name, made only then) and
// the type expected. FALLBACK gives the JSON type wanted, for T json.
template <class T, class Named>
Result<T> json_as(const nlohmann::json& v, const T& fallback, Named named) {
    auto wrong = [&](std::string_view expected) {
        return make_error(EPROTO, fmt::format("{}: expected {}", named(), expected));
    };
    if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean())
            return wrong("true or false");
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string())
            return wrong("a string");
    } else if constexpr (std::is_integral_v<T>) {
        // Any integer in T's range, signed or not: JSON made in this process
        // may hold a count as a signed integer where text parses unsigned.
        bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<uint64_t>())
                                           : v.is_number_integer() && std::in_range<T>(v.get<int64_t>());
        if (!fits)
            return wrong(std::is_unsigned_v<T> ? "a non-negative integer" : "an integer");
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number())
            return wrong("a number");
    } else if constexpr (std::is_same_v<T, nlohmann::json>) {
        if (v.type() != fallback.type() && !fallback.is_null())
            return wrong(fallback.is_object() ? "an object" : fallback.is_array() ? "an array" : "another type");
    }
    return v.get<T>();
}
}  // namespace detail

template <class T>
Result<T> json_field(const nlohmann::json& object, std::string_view key, T fallback, std::string_view path = "") {
    if (!object.is_object())
        return fallback;
    auto found = object.find(key);  // (one lookup, no key copied)
    if (found == object.end())
        return fallback;
    return detail::json_as<T>(*found, fallback,
                              [&] { return fmt::format("{}{}{}", path, path.empty() ? "" : ".", key); });
}

// VALUE, found some other way (an element of a row), as a T; an Error
// names it NAME. A json T takes any type.
template <class T>
Result<T> json_as(const nlohmann::json& value, std::string_view name) {
    return detail::json_as<T>(value, T{}, [name] { return name; });
}

}  // namespace banyan
