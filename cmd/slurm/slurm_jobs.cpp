#include "cmd/slurm/slurm_jobs.hpp"

#include <fmt/format.h>

#include "cmd/slurm_options.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/slurm_names.hpp"
#include "core/text.hpp"

namespace banyan::cli::slurm {
namespace {

// An exit status as Slurm splits it: code, or the signal past 128.
void set_status(SlurmJob& j, const nlohmann::json& status) {
    if (!status.is_number_integer())
        return;
    int s = status.get<int>();
    if (s > 128 && s < 128 + 65) {
        j.exit_code = 0;
        j.exit_signal = s - 128;
    } else {
        j.exit_code = s;
    }
}

// A dependency as the job manager lists it ("afterok:fA", "afterany:fA[3]",
// "singleton", "begin-time:...") in Slurm's terms: "afterok:123(unfulfilled)",
// "afterany:123_3(unfulfilled)"; a begin time is no dependency there (its
// reason is BeginTime). Listed dependencies are the unmet ones.
std::optional<std::string> slurm_dependency(const std::string& listed) {
    if (listed.starts_with("begin-time:"))
        return std::nullopt;
    auto colon = listed.find(':');
    if (colon == std::string::npos)
        return listed + "(unfulfilled)";
    std::string scheme = listed.substr(0, colon);
    auto ref = parse_job_ref(std::string_view(listed).substr(colon + 1));
    if (!ref)
        return listed;
    std::string target = ref->index ? fmt::format("{}_{}", ref->id, *ref->index) : std::to_string(ref->id);
    return fmt::format("{}:{}(unfulfilled)", scheme == "afterstart" ? "after" : scheme, target);
}

template <class T>
T field(const nlohmann::json& row, std::string_view key, T fallback) {
    return json_field<T>(row, key, fallback, "job").value_or(fallback);
}

}  // namespace

std::string SlurmJob::slurm_id() const {
    return array_id ? fmt::format("{}_{}", *array_id, index) : std::to_string(id);
}

std::string short_state(const std::string& state) {
    static const std::map<std::string, std::string> names = {
        {"PENDING", "PD"},   {"RUNNING", "R"},    {"COMPLETING", "CG"},    {"COMPLETED", "CD"},
        {"FAILED", "F"},     {"CANCELLED", "CA"}, {"TIMEOUT", "TO"},       {"OUT_OF_MEMORY", "OOM"},
        {"NODE_FAIL", "NF"}, {"PREEMPTED", "PR"}};
    auto it = names.find(state);
    return it == names.end() ? state : it->second;
}

std::vector<SlurmJob> listed_jobs(Client& client, bool all_users) {
    // Every state: inactive jobs the job manager still holds too (sacct,
    // scontrol show job).
    nlohmann::json request{
        {"states", {"depend", "priority", "sched", "run", "cleanup", "inactive"}}};
    if (all_users)
        request["all_users"] = true;
    JobList list = list_jobs(client, request);
    std::vector<SlurmJob> out;
    out.reserve(list.size());
    for (size_t i = 0; i < list.size(); i++) {
        nlohmann::json row = list.object(i);
        SlurmJob j;
        j.id = field<JobId>(row, "id", 0);
        j.userid = field<uint32_t>(row, "userid", 0);
        j.name = field<std::string>(row, "name", "");
        j.partition = field<std::string>(row, "queue", "");
        j.account = field<std::string>(row, "bank", "");
        j.nodelist = field<std::string>(row, "nodelist", "");
        j.ntasks = field<uint64_t>(row, "ntasks", 0);
        j.nnodes = field<uint64_t>(row, "nnodes", 0);
        j.ncores = field<uint64_t>(row, "ncores", 0);
        j.t_submit = field<double>(row, "t_submit", 0);
        j.t_start = field<double>(row, "t_run", 0);
        j.t_end = field<double>(row, "t_inactive", 0);
        j.time_limit = field<double>(row, "duration", 0);
        j.urgency = field<int>(row, "urgency", 16);
        j.priority = field<double>(row, "priority", 0);
        if (const auto& deps = row["dependencies"]; deps.is_array())
            for (const auto& d : deps) {
                if (!d.is_string())
                    continue;
                if (d.get<std::string>().starts_with("begin-time:"))
                    j.begin_pending = true;
                else if (auto slurm = slurm_dependency(d.get<std::string>()))
                    j.dependencies.push_back(*slurm);
            }
        if (const auto& of = row["array_of"]; of.is_object()) {
            j.array_id = field<JobId>(of, "id", 0);
            j.index = field<uint32_t>(of, "index", 0);
        }
        if (const auto& a = row["array"]; a.is_object()) {
            j.is_array = true;
            j.array_left = field<std::string>(a, "to_make", "");
        }
        set_status(j, row["status"]);
        std::string state = field<std::string>(row, "state", "");
        std::string exception = field<std::string>(json_object_at(row, {"exception"}), "type", "");
        if (state == "run") {
            j.state = "RUNNING";
        } else if (state == "cleanup") {
            j.state = "COMPLETING";
        } else if (state == "inactive") {
            j.state = slurm_ended_state(field<std::string>(row, "result", ""), exception);
        } else {
            j.state = "PENDING";
            j.reason = state == "depend" ? (j.begin_pending && j.dependencies.empty() ? "BeginTime" : "Dependency")
                       : j.urgency == 0  ? "JobHeldUser"
                       : state == "sched" && !field<std::string>(row, "limit", "").empty() ? "AssocGrpCPURunMinutesLimit"
                       : state == "sched" ? "Resources"
                                          : "Priority";
        }
        out.push_back(std::move(j));
    }
    return out;
}

std::vector<SlurmJob> recorded_jobs(Client& client, const nlohmann::json& query) {
    auto answer = must(client.rpc("accounting.history", query, 0));
    std::vector<SlurmJob> out;
    for (const auto& r : answer_field<nlohmann::json>(answer, "records", nlohmann::json::array())) {
        if (!r.is_object())
            continue;
        SlurmJob j;
        j.id = field<JobId>(r, "id", 0);
        j.userid = field<uint32_t>(r, "userid", 0);
        j.name = field<std::string>(r, "name", "");
        j.partition = field<std::string>(r, "queue", "");
        j.account = field<std::string>(r, "bank", "");
        j.nodelist = field<std::string>(r, "nodelist", "");
        j.nnodes = field<uint64_t>(r, "nnodes", 0);
        j.ncores = field<uint64_t>(r, "ncores", 0);
        j.t_submit = field<double>(r, "t_submit", 0);
        j.t_start = field<double>(r, "t_start", 0);
        j.t_end = field<double>(r, "t_end", 0);
        j.time_limit = field<double>(r, "time_limit", 0);
        j.cpu = field<double>(r, "cpu", 0);
        j.maxrss = field<uint64_t>(r, "maxrss", 0);
        set_status(j, r.contains("status") ? r["status"] : nlohmann::json());
        j.state = slurm_ended_state(field<std::string>(r, "result", ""), field<std::string>(r, "exception", ""));
        out.push_back(std::move(j));
    }
    return out;
}

nlohmann::json slurm_job_request(const std::string& text) {
    std::string ref = text;
    if (auto under = text.find('_'); under != std::string::npos)
        ref = text.substr(0, under) + "[" + text.substr(under + 1) + "]";
    auto parsed = parse_job_ref(ref);
    if (!parsed)
        fail(fmt::format("Invalid job id specified: {}", text));
    return job_request(ref);
}

JobSelection::JobSelection(const std::vector<std::string>& texts) {
    for (const auto& text : texts) {
        nlohmann::json request = slurm_job_request(text);
        std::optional<uint32_t> index;
        if (request.contains("index"))
            index = request["index"].get<uint32_t>();
        refs_.emplace_back(request["id"].get<JobId>(), index);
    }
}

bool JobSelection::contains(const SlurmJob& j) const {
    for (const auto& [id, index] : refs_) {
        if (index ? j.array_id == id && j.index == *index : j.id == id || j.array_id == id)
            return true;
    }
    return false;
}

std::vector<JobId> JobSelection::ids() const {
    std::vector<JobId> out;
    for (const auto& [id, index] : refs_)
        out.push_back(id);
    return out;
}

std::vector<std::string> id_list(const std::vector<std::string>& given) {
    std::vector<std::string> out;
    for (const auto& g : given)
        for (const auto& id : split_commas(g))
            if (!id.empty())
                out.push_back(id);
    return out;
}

bool parse_or_help(CLI::App& app, const std::vector<std::string>& args) {
    try {
        app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
    } catch (const CLI::CallForHelp&) {
        fmt::print("{}", app.help());
        return false;
    }
    return true;
}

std::string slurm_time(double t, const std::string& none) {
    return t > 0 ? format_moment(t) : none;
}

std::string slurm_limit(double seconds) {
    return seconds > 0 ? slurm_duration(seconds) : "UNLIMITED";
}

std::string pad(const std::string& value, size_t width, bool right, bool cut) {
    if (width == 0)
        return value;
    if (value.size() >= width)
        return cut ? value.substr(0, width) : value;  // Slurm cuts a value to its field
    std::string fill(width - value.size(), ' ');
    return right ? fill + value : value + fill;
}

}  // namespace banyan::cli::slurm
