package daemon

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdGauge tells how many file descriptors the process has open and its
// open-file limit, for the control socket's descriptor reserve. Counting
// /proc/self/fd costs a directory read, so a count is reused for
// fdSampleEvery, plus the connections admitted since (each one a
// descriptor): a flood cannot slip past the reserve between two counts.
type fdGauge struct {
	mu       sync.Mutex
	at       time.Time
	open     int
	limit    int
	admitted int // connections admitted since the count
	// count, if set, replaces countFDs (tests).
	count func() (open, limit int)
}

const fdSampleEvery = 100 * time.Millisecond

// usage returns the descriptors open now (estimated) and the soft limit;
// limit 0 means unknown (no bound applied).
func (g *fdGauge) usage() (open, limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) > fdSampleEvery {
		g.at, g.admitted = time.Now(), 0
		if g.count != nil {
			g.open, g.limit = g.count()
		} else {
			g.open, g.limit = countFDs()
		}
	}
	return g.open + g.admitted, g.limit
}

// admit counts a connection admitted after the last sample.
func (g *fdGauge) admit() {
	g.mu.Lock()
	g.admitted++
	g.mu.Unlock()
}

func countFDs() (open, limit int) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0, 0
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, 0
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, 0
	}
	return len(names) - 1, int(rl.Cur) // less the directory's own
}
