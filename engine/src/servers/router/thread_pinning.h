// thread_pinning.h — one CPU per HTTP thread (`--pin-threads on`).
//
// Why: on a 2-core machine shared with other busy processes, the router's two HTTP threads used
// about 10% more CPU per request than two nginx workers while the scheduler moved them between
// cores, and the same as nginx's when both were pinned (bench/RESULTS.md, session 7). Pinning
// pays where the CPUs are the router's own (a Kubernetes pod with whole CPUs under the static CPU
// manager policy, a dedicated host); on CPUs shared with other work it can hold a thread on a busy
// CPU, so it is off by default, as nginx's worker_cpu_affinity is.
#pragma once

#include <vector>

namespace disagg::router {

/// The CPUs the calling thread may run on (sched_getaffinity: in a container, those its cgroup
/// allows), in increasing order; empty when the kernel does not say.
std::vector<int> allowed_cpus();

/// Restricts the calling thread to `cpu`. False when the kernel refuses (e.g. a CPU outside the
/// allowed set); the thread's affinity is then unchanged.
bool pin_this_thread(int cpu);

}  // namespace disagg::router
