#include "broker/exec/ended_shares.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"

namespace banyan {
namespace {

// (The alloc's time is written whole: it names the run, and is compared.)
std::string line_of(const EndedShares::End& end) {
    return fmt::format("{} {} {:.6f} {} {:.6f} {} {}\n", end.id, end.status, end.time, end.started ? 1 : 0,
                       end.usage.cpu, end.usage.maxrss, end.alloc);
}

std::string line_of(JobId id, double at, double alloc) {
    return fmt::format("{} go {:.6f} {}\n", id, at, alloc);
}

// This boot of the machine: records made before it knew of shares that a
// reboot ended unseen.
std::string boot_id() {
    auto text = read_text_file("/proc/sys/kernel/random/boot_id");
    if (!text)
        return "";
    return text->substr(0, text->find('\n'));
}

}  // namespace

EndedShares::EndedShares(std::string path, double keep_seconds)
    : path_(std::move(path)), keep_seconds_(keep_seconds), boot_(boot_id()) {
    double now = wall_now();
    records_since_ = now;
    if (auto text = read_text_file(path_)) {
        std::istringstream in(*text);
        std::vector<Kept> read;
        std::vector<LetGo> went;
        for (std::string line; std::getline(in, line);) {
            unsigned long long id = 0, maxrss = 0;
            int status = 0, started = 0;
            double time = 0, cpu = 0, alloc = 0;
            char boot[64] = "";
            // The first line, from a broker of this boot (a broker before
            // these lines drops it: its records then begin now).
            if (std::sscanf(line.c_str(), "since %lf %63s", &time, boot) == 2) {
                if (!boot_.empty() && boot == boot_ && time <= now)
                    records_since_ = time;
                continue;
            }
            if (std::sscanf(line.c_str(), "%llu go %lf %lf", &id, &time, &alloc) == 3) {  // (not an end: ignored
                if (now - time <= keep_seconds_)                                          // by older brokers)
                    went.push_back({time, id, alloc});
                continue;
            }
            // Seven fields; four or six from a broker before usage, or the
            // run, was kept.
            int fields = std::sscanf(line.c_str(), "%llu %d %lf %d %lf %llu %lf", &id, &status, &time, &started, &cpu,
                                     &maxrss, &alloc);
            if ((fields == 4 || fields >= 6) && now - time <= keep_seconds_)
                read.push_back({{id, status, time, started != 0, {cpu, maxrss}, alloc}, std::min(time, now), 0});
        }
        std::stable_sort(read.begin(), read.end(), [](const Kept& a, const Kept& b) { return a.kept_at < b.kept_at; });
        for (const auto& k : read)
            append(k.end, k.kept_at);
        std::stable_sort(went.begin(), went.end(), [](const LetGo& a, const LetGo& b) { return a.at < b.at; });
        let_go_.assign(went.begin(), went.end());
    }
    rewrite();
}

void EndedShares::add(End end, std::vector<ForRank0> kept) {
    double now = wall_now();
    expire(now);
    // Appended, not synced: it must outlive this process, not the machine,
    // whose restart leaves no shell to re-attach.
    std::string line = line_of(end);
    if (file_ && write(file_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        log::warning("exec", "{}: {}", path_, std::strerror(errno));
    uint64_t seq = append(end, now);
    if (kept.empty())
        kept_messages_.erase(end.id);  // (an earlier end of the same id)
    else
        kept_messages_[end.id] = {seq, std::move(kept)};
    line_added();
}

// Rewritten with only what is kept once it holds twice as much.
void EndedShares::line_added() {
    if (++file_lines_ > std::max<size_t>(4096, 2 * (count_ + let_go_.size())))
        rewrite();
}

void EndedShares::let_go(JobId id, double alloc) {
    double now = wall_now();
    expire(now);
    std::string line = line_of(id, now, alloc);
    if (!file_ || write(file_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        // Not kept: no record before now may vouch for a share (nor the
        // next broker's, from this file).
        log::warning("exec", "{}: {}; shares started before now are taken as run", path_, std::strerror(errno));
        records_since_ = now;
        if (!rewrite())
            unlink(path_.c_str());
    }
    let_go_.push_back({now, id, alloc});
    line_added();
}

// A scan of all kept: only for a share found missing, and the times are
// this rank's clock, not rank 0's.
bool EndedShares::was_let_go(JobId id, double alloc) const {
    for (auto it = let_go_.rbegin(); it != let_go_.rend(); ++it)
        if (it->id == id && (it->alloc == alloc || it->alloc == 0))
            return true;
    return false;
}

uint64_t EndedShares::append(const End& end, double kept_at) {
    if (blocks_.empty() || blocks_.back().size() == kBlock)
        blocks_.emplace_back().reserve(kBlock);
    blocks_.back().push_back({end, kept_at, next_seq_});
    count_++;
    return next_seq_++;
}

std::optional<EndedShares::End> EndedShares::find(JobId id) const {
    for (auto block = blocks_.rbegin(); block != blocks_.rend(); ++block) {
        size_t first = block == std::prev(blocks_.rend()) ? front_ : 0;
        for (size_t i = block->size(); i-- > first;)
            if ((*block)[i].end.id == id)
                return (*block)[i].end;
    }
    return std::nullopt;
}

std::vector<ForRank0> EndedShares::take_kept(JobId id) {
    auto it = kept_messages_.find(id);
    if (it == kept_messages_.end())
        return {};
    auto kept = std::move(it->second.second);
    kept_messages_.erase(it);
    return kept;
}

void EndedShares::expire(double now) {
    while (!let_go_.empty() && now - let_go_.front().at > keep_seconds_)
        let_go_.pop_front();
    while (!blocks_.empty()) {
        auto& block = blocks_.front();
        while (front_ < block.size() && now - block[front_].kept_at > keep_seconds_) {
            auto kept = kept_messages_.find(block[front_].end.id);
            if (kept != kept_messages_.end() && kept->second.first == block[front_].seq)  // (not a later end's)
                kept_messages_.erase(kept);
            front_++;
            count_--;
        }
        if (front_ < block.size() || block.size() < kBlock)
            return;  // (the last block still fills)
        blocks_.pop_front();
        front_ = 0;
    }
}

bool EndedShares::rewrite() {
    std::string text = fmt::format("since {:.6f} {}\n", records_since_, boot_.empty() ? "-" : boot_);
    for (size_t b = 0; b < blocks_.size(); b++)
        for (size_t i = b == 0 ? front_ : 0; i < blocks_[b].size(); i++)
            text += line_of(blocks_[b][i].end);
    for (const auto& went : let_go_)
        text += line_of(went.id, went.at, went.alloc);
    std::string tmp = path_ + ".new";
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    file_lines_ = count_ + let_go_.size();  // tried again only after as many more
    bool written = fd && write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                   rename(tmp.c_str(), path_.c_str()) == 0;
    if (!written)
        log::warning("exec", "{}: {}", tmp, std::strerror(errno));
    file_.reset(open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    return written;
}

}  // namespace banyan
