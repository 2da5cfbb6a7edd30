// OutputFormat: the -o FORMAT of the listing commands (banyan jobs,
// banyan history): literal text and {FIELD[:[<>^]WIDTH[.MAX]]} fields,
// parsed once, so an unknown field or a bad spec fails before anything
// is printed.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace banyan::cli {

class OutputFormat {
  public:
    // Fails (cli::fail) naming an unknown field and the `known` ones, or a
    // bad spec.
    OutputFormat(const std::string& format, const std::set<std::string>& known);

    // One line: each field's value from `value_of`, padded and cut as
    // asked, trailing blanks dropped.
    std::string render(const std::function<std::string(const std::string&)>& value_of) const;
    // The header line: each field's title (`title_of`, else the field's
    // name in capitals), as wide as its column.
    std::string header(const std::function<std::string(const std::string&)>& title_of = nullptr) const;
    // The fields' values joined by `delimiter`, with no padding or literal
    // text (banyan history -P).
    std::string parsable(const std::function<std::string(const std::string&)>& value_of,
                         const std::string& delimiter) const;
    bool has(const std::string& field) const;

  private:
    struct Segment {
        std::string literal;
        std::string field;  // empty: literal only
        char align = '<';
        size_t width = 0;
        size_t precision = std::string::npos;  // the most characters shown
    };
    static void append_padded(std::string& out, std::string value, const Segment& s);
    std::vector<Segment> segments_;
};

}  // namespace banyan::cli
