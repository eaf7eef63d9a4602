package bench

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPULimit confines this whole process to a number of cores, for the
// measurements of `lastmile plan`: with cgroup v2 it moves the process
// into a cgroup of its own with cpu.max set, with cgroup v1 into one with
// cpu.cfs_quota_us set (both need root, or a delegated cgroup), and
// otherwise it pins every thread to the first whole cores of its CPU set
// (sched_setaffinity, what taskset does). A quota lets a fraction of a
// core be measured; affinity rounds up. Close puts the process back.
//
// A quota is the daemon's situation under systemd's CPUQuota=: any CPU,
// limited time. The period is 20 ms, shorter than the kernel's default
// 100 ms, so that a throttled process waits at most that long.
type CPULimit struct {
	method string // "cgroup v2 cpu.max", "cgroup v1 cpu.cfs_quota_us", "sched_setaffinity"
	dir    string // the cgroup made, or ""
	back   string // the cgroup.procs file of the cgroup the process came from
	set    unix.CPUSet
	cpus   []int // the CPUs of set, in order
	procs  int   // GOMAXPROCS before the first Set
}

const cpuPeriodUS = 20000

// NewCPULimit prepares a limit; it limits nothing until Set.
func NewCPULimit() (*CPULimit, error) {
	l := &CPULimit{}
	if err := unix.SchedGetaffinity(0, &l.set); err != nil {
		return nil, fmt.Errorf("cpu limit: read this process's CPUs: %w", err)
	}
	for c := 0; c < 1024; c++ {
		if l.set.IsSet(c) {
			l.cpus = append(l.cpus, c)
		}
	}
	if os.Getenv("LASTMILE_CPULIMIT") != "affinity" {
		if err := l.cgroup(); err == nil {
			return l, nil
		}
	}
	l.method = "sched_setaffinity"
	return l, nil
}

// Method says how the limit is applied.
func (l *CPULimit) Method() string { return l.method }

// cgroup makes a cgroup for this process next to its own and moves it
// there.
func (l *CPULimit) cgroup() error {
	own, v1, err := ownCgroup()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("lastmile-plan-%d", os.Getpid())
	if v1 != "" {
		l.method = "cgroup v1 cpu.cfs_quota_us"
		l.dir = filepath.Join(own, name)
		l.back = filepath.Join(own, "cgroup.procs")
		if err := os.Mkdir(l.dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(l.dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cpuPeriodUS)), 0); err != nil {
			os.Remove(l.dir)
			return err
		}
	} else {
		// v2: a process may only live in a leaf, so the new cgroup is a
		// sibling of the process's own, under a parent that gets +cpu.
		l.method = "cgroup v2 cpu.max"
		parent := filepath.Dir(own)
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			return err
		}
		l.dir = filepath.Join(parent, name)
		l.back = filepath.Join(own, "cgroup.procs")
		if err := os.Mkdir(l.dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(l.dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Remove(l.dir)
		return err
	}
	return nil
}

// ownCgroup finds this process's cgroup directory: the v2 one (own, v1
// "") or the v1 cpu hierarchy's (own under it, v1 its mount point).
func ownCgroup() (own, v1 string, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var v2path string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		parts := strings.SplitN(lines.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "cpu" {
				continue
			}
			for _, m := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
				if _, err := os.Stat(filepath.Join(m, "cpu.cfs_quota_us")); err == nil {
					return filepath.Join(m, parts[2]), m, nil
				}
			}
		}
	}
	if v2path != "" && v2path != "/" {
		if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "cpu") {
			return filepath.Join("/sys/fs/cgroup", v2path), "", nil
		}
	}
	return "", "", errors.New("cpu limit: no writable cgroup cpu controller")
}

// Set limits the process to cores cores (0 or less: the whole CPU set),
// and sets GOMAXPROCS to cores rounded up, as the Go runtime sets it for
// a process started under that quota or CPU set (a daemon under
// systemd's CPUQuota=): a process moved into a quota keeps the GOMAXPROCS
// it started with, and more threads than its quota allows run in bursts
// and are throttled.
func (l *CPULimit) Set(cores float64) error {
	if cores <= 0 || math.IsInf(cores, 1) {
		cores = float64(len(l.cpus))
	}
	if l.procs == 0 {
		l.procs = runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(min(max(int(math.Ceil(cores-1e-9)), 1), l.procs))
	switch l.method {
	case "cgroup v2 cpu.max":
		v := fmt.Sprintf("%d %d", int(cores*cpuPeriodUS), cpuPeriodUS)
		return os.WriteFile(filepath.Join(l.dir, "cpu.max"), []byte(v), 0)
	case "cgroup v1 cpu.cfs_quota_us":
		return os.WriteFile(filepath.Join(l.dir, "cpu.cfs_quota_us"), []byte(strconv.Itoa(int(cores*cpuPeriodUS))), 0)
	}
	n := min(max(int(math.Ceil(cores-1e-9)), 1), len(l.cpus))
	var set unix.CPUSet
	for _, c := range l.cpus[:n] {
		set.Set(c)
	}
	return setAffinity(&set)
}

// setAffinity sets every thread's CPUs; threads made later inherit them.
func setAffinity(set *unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("cpu limit: set thread %d's CPUs: %w", tid, err)
		}
	}
	return nil
}

// Close lifts the limit: the process goes back to its cgroup (which is
// removed) or to its CPU set.
func (l *CPULimit) Close() error {
	if l.procs != 0 {
		runtime.GOMAXPROCS(l.procs)
	}
	if l.dir == "" {
		return setAffinity(&l.set)
	}
	err := os.WriteFile(l.back, []byte(strconv.Itoa(os.Getpid())), 0)
	if rerr := os.Remove(l.dir); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("cpu limit: leave cgroup %s: %w", l.dir, err)
	}
	return nil
}
