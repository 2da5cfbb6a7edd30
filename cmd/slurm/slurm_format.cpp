#include "cmd/slurm/slurm_format.hpp"

#include <cctype>

#include <fmt/format.h>

#include "cmd/slurm/slurm_jobs.hpp"

namespace banyan::cli::slurm {

SlurmFormat::SlurmFormat(const std::string& format, const std::string& known) {
    Segment s;
    for (size_t i = 0; i < format.size(); i++) {
        if (format[i] != '%') {
            s.literal += format[i];
            continue;
        }
        size_t j = i + 1;
        if (j < format.size() && format[j] == '%') {
            s.literal += '%';
            i = j;
            continue;
        }
        if (j < format.size() && format[j] == '.') {
            s.right = true;
            j++;
        }
        size_t size = 0;
        while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j])))
            size = size * 10 + static_cast<size_t>(format[j++] - '0');
        if (j == format.size() || !std::isalpha(static_cast<unsigned char>(format[j])))
            fail(fmt::format("Invalid format specification: {}", format));
        if (known.find(format[j]) == std::string::npos)
            fail(fmt::format("%{} is not supported (banyan-slurm(7) lists the fields)", format[j]));
        s.type = format[j];
        s.size = std::min<size_t>(size, 1024);
        segments_.push_back(std::move(s));
        s = Segment{};
        i = j;
    }
    if (!s.literal.empty())
        segments_.push_back(std::move(s));
}

std::string SlurmFormat::render(const std::function<std::string(char)>& value_of) const {
    std::string line;
    for (const auto& s : segments_) {
        line += s.literal;
        if (s.type)
            line += pad(value_of(s.type), s.size, s.right, s.type != 'i' && s.type != 'A' && s.type != 'F');
    }
    return line;
}

std::string SlurmFormat::header(const std::map<char, std::string>& titles) const {
    return render([&](char type) {
        auto it = titles.find(type);
        return it == titles.end() ? std::string(1, type) : it->second;
    });
}

}  // namespace banyan::cli::slurm
