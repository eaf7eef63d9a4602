package daemon

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/lastmile/lastmile/engine"
)

// setHeapLimit keeps the Go soft memory limit at what the daemon has
// accounted for: the jobs' reserved memory, the peer role's budget, plus
// engine.RuntimeOverhead. Without it the collector lets the heap reach
// twice what is live, and a daemon's RSS sits hundreds of MB above its
// jobs' budgets (docs/benchmarks.md, "Memory"). GOMEMLIMIT in the
// daemon's environment wins. It returns the limit in force (0: none set
// here).
func (d *Daemon) setHeapLimit() int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0
	}
	d.mu.Lock()
	n := d.reservedLocked()
	d.mu.Unlock()
	cfg := d.Config()
	if cfg.Peer.Listen != "" {
		n += int64(cfg.Peer.MaxMemory)
	}
	n += engine.RuntimeOverhead
	debug.SetMemoryLimit(n)
	return n
}

// processRSS is the daemon's resident set in bytes, 0 if unknown.
func processRSS() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
