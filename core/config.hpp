// Config: a TOML document with typed getters whose errors name the file,
// the dotted key and what was expected, e.g.
//   "cluster.toml: bootstrap.port: expected an integer in 1-65535, got string".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "core/result.hpp"

namespace banyan {

class Config {
  public:
    // An empty document; every getter returns its fallback.
    Config() = default;

    // Error: the file cannot be read, or "FILE:LINE:COL: reason" for bad TOML.
    static Result<Config> load(const std::string& path);
    // `source` names the text in error messages.
    static Result<Config> parse(std::string_view text, std::string source);

    const std::string& source() const { return source_; }

    // Sets the dotted `key` from "KEY=VALUE" text given on a command line.
    // VALUE is read as a TOML value (30, true, "x", [1,2]); text that is not
    // one is taken as a string, so `tbon.torpid_timeout=1s` works unquoted.
    // Error: no '=', an empty key, or a key path through a non-table.
    Result<void> set_from_text(std::string_view assignment);
    bool has(std::string_view key) const;
    // No key at all: an empty file, or only comments.
    bool empty() const { return root_.empty(); }

    // Each getter returns the value at the dotted `key`, the fallback when the
    // key is absent, or an error when the key is absent without a fallback or
    // present with the wrong type or out of range.
    Result<std::string> get_string(std::string_view key, std::optional<std::string> fallback = std::nullopt) const;
    Result<int64_t> get_int(std::string_view key, int64_t min, int64_t max,
                            std::optional<int64_t> fallback = std::nullopt) const;
    Result<bool> get_bool(std::string_view key, std::optional<bool> fallback = std::nullopt) const;
    Result<std::vector<std::string>> get_string_array(
        std::string_view key, std::optional<std::vector<std::string>> fallback = std::nullopt) const;
    // A table of strings, `name = "text"` (e.g. [resource] properties), by
    // name. Absent: empty.
    Result<std::vector<std::pair<std::string, std::string>>> get_string_table(std::string_view key) const;
    // The keys of the table at `key` (e.g. the queues of [queues]), by
    // name. Absent: empty. Error: not a table.
    Result<std::vector<std::string>> get_keys(std::string_view key) const;
    // A duration in seconds: a number, or a string "250ms", "30s", "5m", "2h", "1d".
    Result<double> get_duration(std::string_view key, std::optional<double> fallback = std::nullopt) const;

    // Error when the table at `table` (a dotted key, "" for the root) holds a
    // key not in `allowed`, so a typo is reported instead of ignored.
    Result<void> check_keys(std::string_view table, const std::vector<std::string_view>& allowed) const;

  private:
    const toml::node* find(std::string_view key) const;
    Error wrong(std::string_view key, std::string_view expected, const toml::node& got) const;
    Error missing(std::string_view key) const;

    std::string source_ = "(defaults)";
    toml::table root_;
};

// Parses a duration string ("250ms", "30s", "5m", "2h", "1d", or plain
// seconds "1.5") into seconds. Error when malformed or negative.
Result<double> parse_duration(std::string_view text);

}  // namespace banyan
