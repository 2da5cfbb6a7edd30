// Slurm's -o formats (squeue(1), sinfo(1)): "%[.][size]type[suffix]"
// fields among literal text; `.` right-justifies.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace banyan::cli::slurm {

class SlurmFormat {
  public:
    // Fails (cli::fail) naming a field whose type is not in `known`.
    SlurmFormat(const std::string& format, const std::string& known);
    // One line: each field's value from `value_of(type)`, padded (and cut,
    // as Slurm does) to its size.
    std::string render(const std::function<std::string(char)>& value_of) const;
    // The header: each field's title (its type's in `titles`), padded the
    // same way.
    std::string header(const std::map<char, std::string>& titles) const;

  private:
    struct Segment {
        std::string literal;  // before the field
        char type = 0;        // 0: literal only
        size_t size = 0;
        bool right = false;
    };
    std::vector<Segment> segments_;
};

}  // namespace banyan::cli::slurm
