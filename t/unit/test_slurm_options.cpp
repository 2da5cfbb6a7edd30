#include <catch2/catch.hpp>

#include <cstdlib>

#include "cmd/slurm_options.hpp"
#include "core/slurm_names.hpp"

using namespace banyan;
using namespace banyan::cli;

namespace {

// The Banyan words for Slurm's `words`, as #SBATCH lines of job.sh would
// give them (one line); the error text when refused.
std::vector<std::string> words_of(const std::vector<std::string>& words) {
    SlurmOptions o;
    auto used = o.parse(words, SlurmCommand::directive, "job.sh:2: #SBATCH");
    REQUIRE(used);
    REQUIRE(*used == words.size());
    auto out = o.banyan_words();
    REQUIRE(out);
    return *out;
}

std::string error_of(const std::vector<std::string>& words, SlurmCommand command = SlurmCommand::directive) {
    SlurmOptions o;
    auto used = o.parse(words, command, "job.sh:2: #SBATCH");
    if (!used)
        return used.error().message;
    auto out = o.banyan_words();
    return out ? "" : out.error().message;
}

using W = std::vector<std::string>;

}  // namespace

TEST_CASE("Slurm's time limits in every form", "[slurm]") {
    CHECK(*slurm_minutes_time("10") == 600);
    CHECK(*slurm_minutes_time("10:30") == 630);
    CHECK(*slurm_minutes_time("01:02:03") == 3723);
    CHECK(*slurm_minutes_time("2-12") == 2 * 86400 + 12 * 3600);
    CHECK(*slurm_minutes_time("1-02:30") == 86400 + 2 * 3600 + 30 * 60);
    CHECK(*slurm_minutes_time("1-00:00:10") == 86410);
    CHECK(*slurm_minutes_time("UNLIMITED") == 0);
    CHECK(*slurm_minutes_time("INFINITE") == 0);
    CHECK(*slurm_minutes_time("0") == 0);  // sbatch(1): no limit
    for (const char* bad : {"", "1:2:3:4", "a", "-5", "1-", "1-2:3:4:5", "99999999999"})
        CHECK_FALSE(slurm_minutes_time(bad));
}

TEST_CASE("Slurm's durations as its commands print them", "[slurm]") {
    CHECK(slurm_duration(5) == "00:00:05");
    CHECK(slurm_duration(3723) == "01:02:03");
    CHECK(slurm_duration(90061) == "1-01:01:01");
    CHECK(slurm_duration(65, true) == "1:05");
    CHECK(slurm_duration(3723, true) == "1:02:03");
}

TEST_CASE("Slurm's filename patterns become the shell's templates", "[slurm]") {
    CHECK(*slurm_filename("slurm-%j.out") == "slurm-{{id.dec}}.out");
    CHECK(*slurm_filename("%x-%u.%A_%a") == "{{name}}-{{user}}.{{array_id.dec}}_{{array_index}}");
    CHECK(*slurm_filename("n%N.t%t.%%") == "n{{node}}.t{{taskid}}.%");
    CHECK(*slurm_filename("as\\is-%j") == "asis-%j");  // a backslash: no patterns
    CHECK(slurm_filename("job%J").error().message.find("%J is not supported") != std::string::npos);
    CHECK(slurm_filename("job%4j").error().message.find("%4 is not supported") != std::string::npos);
    CHECK(slurm_filename("end%").error().message.find("a % at the end") != std::string::npos);
}

TEST_CASE("sbatch's options become banyan submit's", "[slurm]") {
    CHECK(words_of({"-N", "2", "--ntasks-per-node=4"}) == W{"--nodes=2", "--ntasks=8"});
    CHECK(words_of({"-N2-2", "-n8"}) == W{"--nodes=2", "--ntasks=8"});
    // Slurm's default: a task a node, the nodes shared (not banyan batch -N's whole nodes).
    CHECK(words_of({"-N", "3"}) == W{"--nodes=3", "--ntasks=3"});
    CHECK(words_of({"-c4", "-t", "1-00:00:00", "-J", "sim"}) ==
          W{"--cores-per-task=4", "--time-limit=86400s", "--job-name=sim"});
    CHECK(words_of({"--time=UNLIMITED"}).empty());
    CHECK(words_of({"--mem=4000"}) == W{"--mem=4000M"});
    CHECK(words_of({"--mem=4G"}) == W{"--mem=4G"});
    CHECK(words_of({"--mem=0"}) == W{"--exclusive"});
    CHECK(words_of({"--mem-per-cpu=512"}) == W{"--mem-per-cpu=512M"});
    CHECK(words_of({"-p", "debug", "-A", "physics"}) == W{"--queue=debug", "--bank=physics"});
    CHECK(words_of({"--qos=high"}) == W{"--queue=high"});
    CHECK(words_of({"--array=1-10%2"}) == W{"--array=1-10%2"});
    CHECK(words_of({"--requeue", "--no-requeue"}).empty());  // the last wins
    CHECK(words_of({"--no-requeue", "--requeue"}) == W{"--requeue"});
    CHECK(words_of({"-H"}) == W{"--urgency=0"});
    CHECK(words_of({"--begin=now+2hours"}) == W{"--begin-time=+2h"});
    CHECK(words_of({"--begin=now+1weeks"}) == W{"--begin-time=+7d"});
    CHECK(words_of({"--begin=2026-12-01T10:00:00"}) == W{"--begin-time=2026-12-01T10:00:00"});
    CHECK(error_of({"--begin=now+99999999999999999999weeks"}).find("COUNT at most 9 digits") != std::string::npos);
    CHECK(words_of({"-C", "gpu&bigmem|fat"}) == W{"--requires=gpu and bigmem or fat"});
    CHECK(words_of({"-w", "node[1-2]", "-x", "node3"}) == W{"--requires=host:node[1-2]", "--requires=not host:node3"});
    CHECK(words_of({"-J", "a", "-J", "b"}) == W{"--job-name=b"});  // the last of one name wins
}

TEST_CASE("GPUs: per node and in all become per task", "[slurm]") {
    CHECK(words_of({"--gres=gpu:2"}) == W{"--gpus-per-task=2"});
    CHECK(words_of({"--gres=gpu"}) == W{"--gpus-per-task=1"});
    CHECK(words_of({"-N2", "-n4", "--gres=gpu:4"}) == W{"--nodes=2", "--ntasks=4", "--gpus-per-task=2"});
    CHECK(words_of({"-n4", "-G8"}) == W{"--ntasks=4", "--gpus-per-task=2"});
    CHECK(error_of({"-n3", "-G4"}).find("4 GPUs do not split evenly over 3 tasks") != std::string::npos);
    CHECK(error_of({"-n4", "--gres=gpu:2"}).find("with --ntasks it needs --nodes") != std::string::npos);
    CHECK(error_of({"--gres=gpu:a100:2"}).find("typed GPUs") != std::string::npos);
    CHECK(error_of({"--gres=fpga:1"}).find("only gpu:COUNT") != std::string::npos);
    CHECK(error_of({"-G2", "--gpus-per-task=1"}).find("give one of") != std::string::npos);
}

TEST_CASE("Slurm's dependencies", "[slurm]") {
    CHECK(words_of({"-d", "afterok:11:12,afterany:13"}) ==
          W{"--dependency=afterok:11:12", "--dependency=afterany:13"});
    CHECK(words_of({"--dependency=after:7"}) == W{"--dependency=afterstart:7"});
    CHECK(words_of({"-d", "afternotok:40_3"}) == W{"--dependency=afternotok:40[3]"});
    CHECK(words_of({"-d", "afterok:1", "-d", "afterany:2"}) ==
          W{"--dependency=afterok:1", "--dependency=afterany:2"});  // a list option adds
    CHECK(error_of({"-d", "afterok:1?afterok:2"}).find("any-of lists") != std::string::npos);
    CHECK(error_of({"-d", "afterok:1+30"}).find("a delay") != std::string::npos);
    CHECK(error_of({"-d", "aftercorr:1"}).find("'aftercorr': not supported") != std::string::npos);
    CHECK(words_of({"-d", "singleton"}) == W{"--dependency=singleton"});
    CHECK(error_of({"-d", "afterok"}).find("expected afterok:JOBID") != std::string::npos);
    CHECK(error_of({"-d", "afterok:x1"}).find("'x1': not a job id") != std::string::npos);
}

TEST_CASE("Slurm's export option, as sbatch reads it", "[slurm]") {
    setenv("SLURM_TEST_SET", "1", 1);
    unsetenv("SLURM_TEST_UNSET");
    CHECK(words_of({"--export=ALL"}).empty());
    CHECK(words_of({"--export=NONE"}) == W{"--env-remove=*"});
    CHECK(words_of({"--export=SLURM_TEST_SET,B=2"}) == W{"--env-remove=*", "--env=SLURM_TEST_SET", "--env=B=2"});
    // With ALL the submitter's value wins over one given.
    CHECK(words_of({"--export=ALL,SLURM_TEST_SET=9,B=2"}) == W{"--env=B=2"});
    CHECK(error_of({"--export=SLURM_TEST_UNSET"}).find("SLURM_TEST_UNSET is not set") != std::string::npos);
    CHECK(error_of({"--export=NONE,B=1"}).find("NONE exports nothing") != std::string::npos);
}

TEST_CASE("A refused option names the line and the option as written", "[slurm]") {
    CHECK(error_of({"--switches=1"}) == "job.sh:2: #SBATCH --switches=1: not supported (banyan-slurm(7) lists what is)");
    CHECK(error_of({"-t", "x"}).starts_with("job.sh:2: #SBATCH -t x: 'x': expected MM"));
    CHECK(error_of({"--wrap=true"}) == "job.sh:2: #SBATCH --wrap=true: only on the command line, not in a script");
    CHECK(error_of({"-N"}) == "job.sh:2: #SBATCH -N: needs a value");
    CHECK(error_of({"--requeue=yes"}) == "job.sh:2: #SBATCH --requeue=yes: takes no value");
    CHECK(error_of({"-N", "2-4"}).find("a range of node counts") != std::string::npos);
    CHECK(error_of({"--ntasks-per-node=2"}).find("needs --nodes") != std::string::npos);
    CHECK(error_of({"-N2", "-n3", "--ntasks-per-node=2"}).find("disagree") != std::string::npos);
    CHECK(error_of({"-p", "a,b"}).find("a list of partitions") != std::string::npos);
    CHECK(error_of({"-p", "a", "-q", "b"}).find("give one of them") != std::string::npos);
    CHECK(error_of({"--exclusive=user"}).find("--exclusive=user is not supported") != std::string::npos);
    CHECK(error_of({"-C", "[a*2]"}).find("counts and brackets") != std::string::npos);
    CHECK(error_of({"-n", "0"}).find("expected a positive whole number") != std::string::npos);
    CHECK(error_of({"-n", "99999999999999999999"}).find("expected a positive whole number") != std::string::npos);
}

TEST_CASE("sbatch's command line laid over a script's lines, then translated", "[slurm]") {
    SlurmOptions script, command_line;
    REQUIRE(script.parse({"--requeue", "-t", "10", "-N2", "--ntasks-per-node=4", "--export=NONE"},
                         SlurmCommand::directive, "job.sh:2: #SBATCH"));
    REQUIRE(command_line.parse({"--no-requeue", "-t", "UNLIMITED", "-N4", "--export=ALL"}, SlurmCommand::sbatch, ""));
    // Alone, the command line makes up nothing from what it lacks.
    CHECK(*command_line.banyan_words(false) == W{"--nodes=4"});
    script.overlay(command_line);
    CHECK(*script.banyan_words() == W{"--nodes=4", "--ntasks=16"});  // no requeue, no limit, every variable
    SlurmOptions per_node_only;
    REQUIRE(per_node_only.parse({"--ntasks-per-node=2"}, SlurmCommand::sbatch, ""));
    CHECK(per_node_only.banyan_words(false)->empty());  // waits for the script's -N
    // A batch job's instance passes USR1 on: to its steps, or with B: to
    // its shell alone; any other signal would end its brokers.
    CHECK(words_of({"-t", "5", "--signal=USR1@60"}) == W{"--time-limit=300s", "--signal=USR1@60", "--signal-to=jobs"});
    CHECK(words_of({"-t", "5", "--signal=B:USR2@60"}) ==
          W{"--time-limit=300s", "--signal=USR2@60", "--signal-to=script"});
    CHECK(words_of({"-t", "5", "--signal=B:sigusr1@60"}) ==
          W{"--time-limit=300s", "--signal=sigusr1@60", "--signal-to=script"});
    CHECK(error_of({"-t", "5", "--signal=HUP@60"}).find("passes on only USR1 and USR2") != std::string::npos);
    CHECK(error_of({"-t", "5", "--signal=R:USR1@60"}).find("R: (a reservation's end)") != std::string::npos);
    SlurmOptions step;
    REQUIRE(step.parse({"-t", "5", "--signal=USR1@60"}, SlurmCommand::srun, ""));
    CHECK(*step.banyan_words() == W{"--time-limit=300s", "--signal=USR1@60"});
}

TEST_CASE("Mail requests go to the job manager; types it cannot send are refused", "[slurm]") {
    SlurmOptions o;
    REQUIRE(o.parse({"--mail-type=END", "--mail-user=a@b"}, SlurmCommand::directive, "job.sh:4: #SBATCH"));
    CHECK(*o.banyan_words() == W{"--setattr=system.mail.type=END", "--setattr=system.mail.user=a@b"});
    CHECK(words_of({"--mail-type=begin,fail"}) == W{"--setattr=system.mail.type=begin,fail"});
    CHECK(error_of({"--mail-type=TIME_LIMIT_90"}).find("'TIME_LIMIT_90': not supported") != std::string::npos);
}

TEST_CASE("A command line stops at the script or command", "[slurm]") {
    SlurmOptions o;
    auto used = o.parse({"-n", "2", "--wrap=x", "job.sh", "-n", "3"}, SlurmCommand::sbatch, "");
    REQUIRE(used);
    CHECK(*used == 3);
    CHECK(o.value("wrap") == "x");
    SlurmOptions run;
    CHECK(*run.parse({"-l", "--", "-n"}, SlurmCommand::srun, "") == 2);
    CHECK(*run.banyan_words() == W{"--label-io"});
    SlurmOptions bad;
    CHECK(bad.parse({"--label"}, SlurmCommand::sbatch, "").error().message ==
          "--label: not supported (banyan-slurm(7) lists what is)");
}

TEST_CASE("srun's containers (Slurm's --container, Pyxis' --container-image and --container-mounts)", "[slurm]") {
    auto srun = [](const W& words) {
        SlurmOptions o;
        auto used = o.parse(words, SlurmCommand::srun, "");
        REQUIRE(used);
        return o.banyan_words();
    };
    CHECK(*srun({"--container-image=/img/app.tar"}) == W{"--container=/img/app.tar"});
    CHECK(*srun({"--container=/img/layout"}) == W{"--container=/img/layout"});
    CHECK(*srun({"--container-image=app", "--container-mounts=/data:/data:ro,/scratch"}) ==
          W{"--container=app", "--container-mount=/data:/data:ro", "--container-mount=/scratch:/scratch"});
    CHECK_FALSE(srun({"--container=a", "--container-image=b"}));
    CHECK(error_of({"--container-image=app"}) ==
          "job.sh:2: #SBATCH --container-image=app: the batch script runs on the host, in its own instance: give it "
          "to srun in the script (each step then runs in the container)");
}
