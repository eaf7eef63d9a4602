// Package cpus says how many CPUs this process may keep busy.
//
// It owns one question, asked once when a pool is sized: "how many
// goroutines doing CPU-bound work can run at the same time without being
// throttled?" The answer is GOMAXPROCS lowered to the CPU bandwidth limit of
// the process's cgroup (cgroup v2 cpu.max, cgroup v1 cpu.cfs_quota_us over
// cpu.cfs_period_us), which is what systemd's CPUQuota= and container
// runtimes' --cpus set.
//
// Since Go 1.25 the runtime already lowers the default GOMAXPROCS to the
// cgroup limit, but never below 2, it reads only the process's own cgroup
// and not its ancestors, and an explicit GOMAXPROCS overrides it. Available
// takes the minimum of GOMAXPROCS and every limit on the path from the
// process's cgroup to the root of the hierarchy, so a 1-CPU quota gives one
// worker and a quota set on a parent slice is honoured.
//
// The package reads /proc and /sys; it never writes them, never changes
// GOMAXPROCS, keeps no state between calls, and imports no other lastmile
// package.
package cpus
