package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/engine"
	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/shm"
)

// Daemon is lastmiled: the control API, the jobs and their supervisors,
// the CPU scheduler, metrics and the reclaim loop. New, then Start; Drain
// for a graceful stop; Close for a hard one.
type Daemon struct {
	log     *slog.Logger
	level   *slog.LevelVar
	version string
	started time.Time
	store   *store
	// stateLock is the descriptor holding state_dir's flock (statelock.go):
	// kept open for the process's life, never closed.
	stateLock int
	sched     *Scheduler
	notify    func(state string) // systemd notifications; never nil

	cfgMu    sync.Mutex
	reloadMu sync.Mutex // one Reload at a time
	// restartNeeded names the keys the last reload found changed but
	// could not apply (cfgMu): GET /v1/status shows them.
	restartNeeded []string
	cfg           Config
	adminGID      int64 // -1: no admin group

	mu         sync.Mutex
	jobs       map[string]*Job // by id
	submitting map[string]chan struct{}

	draining atomic.Bool
	srv      *http.Server
	ln       net.Listener
	msrv     *http.Server
	mln      net.Listener
	stop     chan struct{}
	loops    sync.WaitGroup

	// CPU peers (peers.go): this host's data roots, the peer server when
	// it is one, and the pool of peers it spills to.
	roots   *roots.Roots
	peerSrv *cpupeer.Server
	// peerTLS and peersTLS are the certificates of the peer role and of
	// the spill pool, read again on SIGHUP (reloadTLS); nil when unset.
	peerTLS, peersTLS *cpupeer.Creds
	peerLn            net.Listener
	pool              *cpupeer.Pool

	waits  jobWaits      // trainer waits per batch, sampled by sampleWaits
	advice adviceTracker // stall and headroom per job over a window (advice.go)

	persistFailures atomic.Int64 // job record writes that failed
	refused         refusals     // refused submissions and attaches (refusals.go)
	heapLimit       atomic.Int64 // the Go memory limit set (heaplimit.go), 0: none

	gpuInv gpuInventory // the host's GPUs, read at the first job (gpu.go)

	s3st s3State // the S3 client and allow-list, made at first use (s3.go)
}

// New checks cfg and returns a daemon that is not started yet. level, if
// not nil, is the logger's level, which Reload changes. notify, if not
// nil, receives systemd state strings ("STATUS=...").
func New(cfg Config, log *slog.Logger, level *slog.LevelVar, version string, notify func(string)) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if level == nil {
		level = new(slog.LevelVar)
	}
	if notify == nil {
		notify = func(string) {}
	}
	d := &Daemon{
		log: log, level: level, version: version, started: time.Now(), cfg: cfg, notify: notify,
		sched: NewScheduler(cfg.Workers), jobs: make(map[string]*Job), submitting: make(map[string]chan struct{}),
		stop: make(chan struct{}), adminGID: -1,
	}
	if cfg.AdminGroup != "" {
		gid, _ := lookupGroup(cfg.AdminGroup)
		d.adminGID = int64(gid)
	}
	return d, nil
}

// RestartNeeded returns the config keys that the last reload found
// changed in the file but could not apply: they take a restart.
func (d *Daemon) RestartNeeded() []string {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	return slices.Clone(d.restartNeeded)
}

// Config returns the configuration in effect.
func (d *Daemon) Config() Config {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	return d.cfg
}

// Start starts the peer role and the peer pool the config asks for, loads
// the persisted jobs and resumes the unfinished ones (adopting their
// rings), then listens on the socket and the metrics address.
func (d *Daemon) Start() error {
	cfg := d.Config()
	// Before anything in state_dir is read or removed: one daemon per
	// state directory, for the life of the process.
	lock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	d.stateLock = lock
	st, err := openStore(cfg.StateDir)
	if err != nil {
		return err
	}
	d.store = st
	if err := mkdirShared(cfg.ShmDir); err != nil {
		return fmt.Errorf("shm directory: %w", err)
	}
	recs, errs := st.load()
	for _, err := range errs {
		d.log.Error("skip unreadable job record", "err", err)
	}
	// Peers and roots first: a resumed job's supervisor reads them as it
	// starts its run (spillFor), and a job resumed before them would both
	// race with their setting and run without its peers.
	if err := d.startPeers(cfg); err != nil {
		return err
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].Created.Before(recs[b].Created) })
	for _, rec := range recs {
		d.restore(rec)
	}
	if err := d.listen(cfg); err != nil {
		return err
	}
	d.loops.Add(2)
	go d.monitor()
	go d.sampleWaits()
	d.log.Info("lastmiled started", "version", d.version, "socket", cfg.Socket, "metrics", d.MetricsAddr(),
		"workers", cfg.Workers, "cpus", cpus.Available(), "jobs", len(recs), "state_dir", cfg.StateDir, "shm_dir", cfg.ShmDir)
	return nil
}

// MetricsAddr returns the address /metrics listens on, "" if off.
func (d *Daemon) MetricsAddr() string {
	if d.mln == nil {
		return ""
	}
	return d.mln.Addr().String()
}

func (d *Daemon) listen(cfg Config) error {
	if err := mkdirShared(filepath.Dir(cfg.Socket)); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if _, err := os.Lstat(cfg.Socket); err == nil {
		if c, err := net.DialTimeout("unix", cfg.Socket, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("listen on %s: another lastmiled is serving it: stop it first", cfg.Socket)
		}
		os.Remove(cfg.Socket) // stale, from a daemon that died
	}
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return fmt.Errorf("listen on unix socket: %w", err)
	}
	mode, _ := parseMode(cfg.SocketMode)
	if err := os.Chmod(cfg.Socket, mode); err != nil {
		ln.Close()
		return fmt.Errorf("chmod socket: %w", err)
	}
	if cfg.SocketGroup != "" {
		gid, _ := lookupGroup(cfg.SocketGroup)
		if err := os.Lchown(cfg.Socket, -1, int(gid)); err != nil {
			ln.Close()
			return fmt.Errorf("chown socket to group %s: %w", cfg.SocketGroup, err)
		}
	}
	if cfg.Metrics != "off" {
		mln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen for metrics on %s: %w (set metrics: off to disable)", cfg.Metrics, err)
		}
		d.mln = mln
		d.msrv = &http.Server{Handler: d.metricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := d.msrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("metrics server stopped", "err", err)
			}
		}()
	}
	d.srv, d.ln = d.controlServer(cfg, ln)
	go func() {
		if err := d.srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("control API stopped", "err", err)
		}
	}()
	return nil
}

// restore brings back a persisted job: finished ones for listing and
// cleanup, unfinished ones resumed on their surviving rings.
func (d *Daemon) restore(rec *record) {
	log := d.log.With("job", rec.Name, "job_id", rec.ID)
	j, err := d.newJob(rec)
	if err != nil {
		// The spec no longer parses (the daemon was upgraded?): keep the
		// record visible as failed.
		log.Error("cannot restore job", "err", err)
		rec.State, rec.Error, rec.Ended = string(Failed), "lastmiled restart: "+err.Error(), time.Now()
		d.store.put(rec)
		return
	}
	d.mu.Lock()
	d.jobs[j.id] = j
	d.mu.Unlock()
	if State(rec.State).Terminal() {
		close(j.finished)
		j.client.Close()
		return
	}
	resume := make([]engine.Cursor, j.local)
	for r := range resume {
		resume[r] = d.resumeRank(j, rec, r, log)
	}
	j.mu.Lock()
	j.next = resume
	j.state = Pending
	j.restarts++
	j.lastActive = time.Now()
	j.mu.Unlock()
	log.Info("job resumed after restart", "resume", fmt.Sprint(resume))
	go j.supervise()
}

// resumeRank claims rank r's ring if it survived and returns where the
// rank's production resumes: right after the ring's last published batch,
// or, without a ring, where its consumer was last seen.
func (d *Daemon) resumeRank(j *Job, rec *record, r int, log *slog.Logger) engine.Cursor {
	rr := &j.ranks[r]
	start := rr.Start
	name := j.ringName(r)
	info, err := shm.Claim(j.spec.Ring.Dir, name, j.owner)
	switch {
	case err == nil && info.Generation != rr.Generation && r < len(rec.Resume):
		// Created by a run that crashed before recording it.
		start = rec.Resume[r]
		rr.Generation, rr.Start = info.Generation, start
	case err == nil && info.Generation != rr.Generation:
		shm.Unclaim(j.spec.Ring.Dir, name)
		log.Warn("ring is not this job's: replacing it", "rank", r, "ring", name)
		return nextOrStart(rr)
	}
	switch {
	case err == nil && info.State == shm.StateRunning:
		log.Info("adopting ring", "rank", r, "ring", name, "generation", info.Generation, "head", info.Head, "tail", info.Tail)
		if info.HasLast {
			return engine.NextCursor(info.Last)
		}
		return start
	case err == nil:
		// The stream ended (or failed) in the ring: a new ring continues
		// from where the consumer stands.
		shm.Unclaim(j.spec.Ring.Dir, name)
		if c, ok := standing(info, start); ok {
			return c
		}
		return nextOrStart(rr)
	case errors.Is(err, shm.ErrInUse):
		log.Error("ring has a live producer: is another lastmiled running on this shm directory?", "rank", r, "ring", name)
		return nextOrStart(rr)
	default:
		log.Warn("ring gone: resuming from the consumer's last known cursor", "rank", r, "ring", name, "err", err)
		return nextOrStart(rr)
	}
}

func nextOrStart(rr *rankRec) engine.Cursor {
	if rr.Next != nil {
		return *rr.Next
	}
	return rr.Start
}

// jobsSnapshot returns the jobs, newest first.
func (d *Daemon) jobsSnapshot() []*Job {
	d.mu.Lock()
	out := make([]*Job, 0, len(d.jobs))
	for _, j := range d.jobs {
		out = append(out, j)
	}
	d.mu.Unlock()
	sort.Slice(out, func(a, b int) bool { return out[a].created.After(out[b].created) })
	return out
}

// monitor persists cursors, reclaims rings nobody attaches to, removes the
// rings of ended jobs once drained or after the grace period, and forgets
// ended jobs after it.
func (d *Daemon) monitor() {
	defer d.loops.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		if d.draining.Load() {
			continue
		}
		grace := d.Config().Grace.D()
		now := time.Now()
		for _, j := range d.jobsSnapshot() {
			j.mu.Lock()
			st, ended, removed, last, saved, unsaved := j.state, j.ended, j.removed, j.lastActive, j.saved, !j.unsaved.IsZero()
			j.mu.Unlock()
			if unsaved { // a write failed: retry it now
				j.persist()
			}
			switch {
			case st == Running:
				if j.snapshotCursors() {
					j.mu.Lock()
					j.lastActive = now
					j.mu.Unlock()
				} else if now.Sub(last) > grace {
					j.log.Warn("reclaiming job: no trainer attached", "grace", grace)
					j.cancel(fmt.Sprintf("job reclaimed by lastmiled: no trainer attached for %v", grace))
					j.removeRings(time.Time{})
					continue
				}
				if now.Sub(saved) > 5*time.Second {
					j.mu.Lock()
					j.saved = now
					j.mu.Unlock()
					j.persist()
				}
			case st.Terminal() && !removed:
				if now.Sub(ended) > grace || j.drained() {
					j.removeRings(ended)
				} else {
					j.releaseUnread() // canceled, and its last trainer detached
				}
			case st.Terminal() && now.Sub(ended) > grace:
				d.mu.Lock()
				delete(d.jobs, j.id)
				d.mu.Unlock()
				if err := d.store.remove(j.id); err != nil {
					j.log.Warn("forget job", "err", err)
				}
				j.log.Info("job forgotten")
			}
		}
		d.heapLimit.Store(d.setHeapLimit())
		d.notifyStatus()
	}
}

// drained reports whether every ring of an ended job was read to its end
// (or is gone).
func (j *Job) drained() bool {
	for r := 0; r < j.local; r++ {
		info, err := shm.Inspect(j.spec.Ring.Dir, j.ringName(r))
		if err == nil && info.Generation == j.generation(r) && info.Head != info.Tail {
			return false
		}
	}
	return true
}

// sampleWaits samples every ring's consumer_waiting word a hundred times a
// second: the time trainers wait on an empty ring, which the consumer
// does not report anywhere else, and the wait of each batch.
func (d *Daemon) sampleWaits() {
	defer d.loops.Done()
	const every = 10 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		// The time waited and the wait of every batch (waits.go).
		jobs := d.jobsSnapshot()
		d.waits.sample(jobs, every)
		d.advice.maybeSample(jobs, time.Now())
	}
}

// notifyStatus sends systemd a STATUS= line.
func (d *Daemon) notifyStatus() {
	counts := map[State]int{}
	for _, j := range d.jobsSnapshot() {
		j.mu.Lock()
		counts[j.state]++
		j.mu.Unlock()
	}
	s := fmt.Sprintf("STATUS=%d jobs running, %d pending", counts[Running], counts[Pending])
	if d.draining.Load() {
		s = "STATUS=draining: " + strings.TrimPrefix(s, "STATUS=")
	}
	d.notify(s)
}

// Drain stops gracefully: refuse new jobs and attaches, stop granting CPU
// tokens, let the units being decoded finish and be packed, then hand
// every running job's rings over and stop production, persisting where
// each rank stands. The rings stay in place and running; when the process
// exits the kernel drops their producer locks, the trainers see the
// producer die, and the next lastmiled adopts the rings. Drain returns
// when every job is stopped or ctx is done.
func (d *Daemon) Drain(ctx context.Context) error {
	if d.draining.Swap(true) {
		return nil
	}
	d.notifyStatus()
	d.log.Info("draining: no new jobs, no new units")
	d.drainPeer(ctx)
	d.sched.Pause()
	settle, cancel := context.WithTimeout(ctx, d.Config().DrainTimeout.D()/2)
	defer cancel()
	for d.unitsInFlight() > 0 && settle.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for _, j := range d.jobsSnapshot() {
		j.mu.Lock()
		active := !j.state.Terminal() && j.run != nil
		j.mu.Unlock()
		if !active {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.snapshotCursors()
			err := j.stopRun("drain", func(infos []shm.RingInfo) {
				j.mu.Lock()
				defer j.mu.Unlock()
				for r, in := range infos {
					if r < len(j.ranks) {
						if c, ok := standing(in, j.ranks[r].Start); ok {
							j.ranks[r].Next = &c
						}
					}
				}
			})
			if err != nil {
				j.log.Warn("drain: hand over rings", "err", err)
			}
			j.persist()
			j.log.Info("drained: rings left for the next lastmiled to adopt")
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("drain: %w", ctx.Err())
	}
	return d.Close()
}

func (d *Daemon) unitsInFlight() int64 {
	var n int64
	for _, j := range d.jobsSnapshot() {
		j.mu.Lock()
		if j.run != nil {
			n += j.run.prog.UnitsInFlight.Load()
		}
		j.mu.Unlock()
	}
	return n
}

// Close stops the servers and loops at once. It does not stop production
// (Drain does); the process is expected to exit.
func (d *Daemon) Close() error {
	select {
	case <-d.stop:
		return nil
	default:
	}
	close(d.stop)
	var err error
	if d.srv != nil {
		err = d.srv.Close()
	}
	if d.msrv != nil {
		d.msrv.Close()
	}
	d.loops.Wait()
	d.closePeers()
	return err
}

// weightOf returns a job's effective CPU weight: the config's override for
// its name, else what it asked for, else the default.
func (d *Daemon) weightOf(j *Job) int {
	cfg := d.Config()
	if w, ok := cfg.Weights[j.name]; ok {
		return w
	}
	j.mu.Lock()
	w := j.weight
	j.mu.Unlock()
	if w > 0 {
		return w
	}
	return cfg.DefaultWeight
}

// ownedByDaemon reports whether uid and gid are the daemon's own: its
// files need no chown to be theirs.
func (d *Daemon) ownedByDaemon(uid, gid uint32) bool {
	return uint32(os.Geteuid()) == uid && uint32(os.Getegid()) == gid
}

// Healthy reports whether the daemon's locks can be taken within d: what
// the systemd watchdog pings on.
func (d *Daemon) Healthy(within time.Duration) bool {
	ok := make(chan struct{})
	go func() {
		d.mu.Lock()
		d.mu.Unlock()
		d.cfgMu.Lock()
		d.cfgMu.Unlock()
		d.sched.Stats()
		close(ok)
	}()
	select {
	case <-ok:
		return true
	case <-time.After(within):
		return false
	}
}

// mkdirShared creates dir and its missing parents with mode 0755 whatever
// the umask (the unit's UMask=0077 made them 0700): trainers must reach
// the rings and the socket inside. Directories that exist are left as
// they are (/dev/shm is 1777).
func mkdirShared(dir string) error {
	dir = filepath.Clean(dir)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirShared(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, 0o755)
}
