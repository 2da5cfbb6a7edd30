// Result<T>: a value or an Error, the one way Banyan code reports failure
// across a module boundary (no exceptions escape a module).
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace banyan {

// An error: a POSIX errno value (for wire responses and exit codes) and a
// one-line message for humans that names the bad input.
struct Error {
    int code = EINVAL;
    std::string message;
};

// Errors are one line even when they quote user input: control characters
// (a newline in a YAML key, say) are escaped as \n, \t or \xNN.
inline std::string one_line(std::string_view text) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        if (c >= 0x20 && c != 0x7f) {
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0xf];
        }
    }
    return out;
}

inline Error make_error(int code, std::string_view message) {
    return Error{code, one_line(message)};
}

template <class T>
class [[nodiscard]] Result {
  public:
    Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
    Result(Error error) : state_(std::move(error)) {}  // NOLINT

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    // Precondition for value(): ok(). For error(): !ok().
    T& value() & { return std::get<0>(state_); }
    const T& value() const& { return std::get<0>(state_); }
    T&& value() && { return std::get<0>(std::move(state_)); }
    const Error& error() const { return std::get<1>(state_); }

    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

  private:
    std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }

  private:
    Error error_;
    bool ok_ = true;
};

// The first error among `results`, in the order given, or nullopt when all
// are values: for reading several fields and answering the first bad one,
//   if (auto e = first_error(task, stream, data)) return answer(*e);
template <class... R>
std::optional<Error> first_error(const R&... results) {
    std::optional<Error> first;
    ((first || results.ok() ? void() : void(first = results.error())), ...);
    return first;
}

}  // namespace banyan
