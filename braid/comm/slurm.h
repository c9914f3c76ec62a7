// What a Slurm step tells its tasks, decoded: compressed host lists
// ("node[01-04,07],gpu3"), per-node task counts ("2(x3),1"), and what the
// step's own identity derives when the user set no rendezvous (a store port
// and a token every task computes alike without talking to the others).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::comm {

// "node[01-04,07],gpu3" -> node01 node02 node03 node04 node07 gpu3. Several
// bracket groups in one name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2);
// a range keeps the zero padding of its lower bound. Throws ConfigError
// naming the list when it is malformed or expands past 1M hosts.
std::vector<std::string> expand_hostlist(std::string_view list);

// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "2(x3),1" -> 2 2 2 1.
// Throws ConfigError when malformed.
std::vector<int> expand_tasks_per_node(std::string_view spec);

// A store port every task of one step derives alike: in [20000, 30000), below
// Linux's ephemeral range (32768..60999) so outgoing connections never hold
// it; different steps of a job (and different jobs) mostly get different ones.
int derived_port(std::string_view job_id, std::string_view step_id);

// HMAC-SHA256 of "job_id:step_id:uid" as hex. Anyone who knows the job id and
// the user's uid (both public on the cluster, e.g. in squeue) can compute it:
// it keeps stray processes of other jobs and steps out, not a hostile user.
std::string derived_token(std::string_view job_id, std::string_view step_id, unsigned uid);

}  // namespace braid::comm
