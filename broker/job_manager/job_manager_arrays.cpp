// Job arrays (doc/spec/arrays.md): an array in SCHED makes its elements,
// lowest index first, as the throttle and the scheduler's window allow;
// each element is a job of its own; the array ends when they all have.
#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "core/log.hpp"

namespace banyan {

void JobManager::make_elements(Job& array) {
    JobArray& a = *array.array;
    if (array.state == JobState::sched && array.priority != 0 && instance_running_)
        // At most `throttle` active, and no more waiting than the scheduler
        // is asked about at once: the rest stay indexes.
        while ((a.throttle == 0 || a.active < a.throttle) && a.pending < limits_.sched_window) {
            auto index = a.next_to_make();
            if (!index)
                break;
            make_element(array, *index);
        }
    end_array_if_done(array);
}

void JobManager::make_element(Job& array, uint32_t index) {
    JobArray& a = *array.array;
    // What the array read from its jobspec, and the updates since: the
    // element's jobspec is the array's.
    Job e;
    e.id = ids_.next();
    e.userid = array.userid;
    e.name = array.name;
    e.queue = array.queue;
    e.reservation = array.reservation;
    e.bank = array.bank;
    e.ntasks = array.ntasks;
    e.nnodes = e.nnodes_asked = array.nnodes_asked;
    e.ncores = array.ncores;
    e.ngpus = array.ngpus;
    e.duration = array.duration;
    e.requeue_on_node_failure = array.requeue_on_node_failure;
    e.reattach_timeout = array.reattach_timeout;
    e.warning_signal = array.warning_signal;
    e.warning_timeleft = array.warning_timeleft;
    e.mail = array.mail;
    e.sched_jobspec = array.sched_jobspec;
    db_->add_job(e.id, e.userid, array.t_submit, a.jobspec, a.signature);
    Job& element = jobs_.emplace(e.id, std::move(e)).first->second;
    // The array's submit time: elements keep its age and its place in
    // the queue among other jobs.
    nlohmann::json submitted = {
        {"userid", element.userid},
        {"urgency", array.urgency},
        {"array_of", {{"id", array.id}, {"index", index}, {"size", a.size}, {"t_submit", array.t_submit}}}};
    if (!element.bank.empty())
        submitted["bank"] = element.bank;
    post(element, "submit", std::move(submitted));
    if (a.updated)  // kept over a restart, where its jobspec is read again
        post(element, "update", {{"name", array.name}, {"duration", array.duration}, {"queue", array.queue}});
    // In the same commit as the element: after a restart, the indexes to
    // make are those without an `element` event.
    post(array, "element", {{"index", index}, {"id", element.id}});
    a.active++;
    a.pending++;
    banks_.submitted(element);
    // On its way once on disk, as a submitted job is: what reads its
    // jobspec from the database (exec, requeue) reads only what is there.
    db_->after_commit([this, id = element.id] {
        if (Job* j = find(id); j && j->state == JobState::depend)
            advance(*j);
    });
}

// An element moved from `from` to its state now: the array's counts, its
// next elements, and its end.
void JobManager::element_moved(Job& element, JobState from) {
    Job* array = find(element.array_id);
    if (!array || !array->array)
        return;  // (an element requeued after its array was purged)
    JobArray& a = *array->array;
    auto pending = [](JobState s) { return s < JobState::run; };
    auto active = [](JobState s) { return s != JobState::inactive; };
    a.pending = a.pending + pending(element.state) - pending(from);
    a.active = a.active + active(element.state) - active(from);
    array->summary_cache.clear();
    if (element.state == JobState::inactive) {
        // (Once per index: a requeued element may fail again.)
        if (std::string_view result = element.result();
            result != "completed" && !a.not_ok.contains(element.array_index)) {
            std::string why = element.exception_type.empty()
                                  ? fmt::format("exit {}", element.status.value_or(1))
                                  : fmt::format("{}: {}", element.exception_type, element.exception_note);
            post(*array, "element-end",
                 {{"index", element.array_index},
                  {"id", element.id},
                  {"result", result},
                  {"note", fmt::format("{} {} ({})", format_element(array->id, element.array_index), result, why)}});
        }
        dependencies_changed(*array);  // jobs that wait for this element (ID[INDEX])
    }
    if (array->state == JobState::cleanup)
        return release(*array);  // canceled: it ends once its elements have
    // One fewer waiting, or one fewer active: room for the next.
    if ((pending(from) && !pending(element.state)) || (active(from) && !active(element.state)))
        make_elements(*array);
}

void JobManager::end_array_if_done(Job& array) {
    const JobArray& a = *array.array;
    if (array.state >= JobState::run || a.active > 0 || a.next_to_make())
        return;
    bool all_completed = a.not_ok.empty() && a.canceled.empty();
    uint64_t failed = a.not_ok.count();
    nlohmann::json end = {{"status", all_completed ? 0 : 1}, {"made", a.made}, {"failed", failed}};
    if (!a.first_not_ok.empty())
        end["note"] = fmt::format("{} of {} elements did not complete; the first: {}", failed, a.size,
                                  a.first_not_ok);
    else if (!a.canceled.empty())
        end["note"] = fmt::format("indexes {} were canceled before they ran", a.canceled.format());
    post(array, "array-end", std::move(end));
}

// The array ends (canceled, or an exception): its active elements end too.
void JobManager::cancel_elements(const Job& array, const std::string& note, uint32_t userid) {
    std::vector<JobId> active;
    for (auto it = jobs_.upper_bound(array.id); it != jobs_.end(); ++it)
        if (it->second.array_id == array.id && it->second.state != JobState::inactive)
            active.push_back(it->first);
    for (JobId id : active)
        if (Job* element = find(id))
            raise(*element, "cancel", fmt::format("its array {} ended: {}", format_jobid(array.id), note), userid);
}

Job* JobManager::element_of(JobId array, uint32_t index) {
    const Job* a = find(array);
    if (!a || !a->array)
        return nullptr;
    auto it = a->array->elements.find(index);
    return it == a->array->elements.end() ? nullptr : find(it->second);
}

// job-manager.cancel {id, index} of an index still to make (visible_job
// checked it): taken out of those to make (event `element-canceled`).
void JobManager::cancel_unmade(const Message& req, Job& array, uint32_t index) {
    post(array, "element-canceled", {{"index", index}, {"userid", req.userid}});
    dependencies_changed(array);  // those that wait for it can never go
    end_array_if_done(array);
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

}  // namespace banyan
