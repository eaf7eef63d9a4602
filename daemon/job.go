package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/ops"
	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// State is a job's lifecycle state.
type State string

// Job states (docs/control-api.md).
const (
	Pending  State = "pending"
	Running  State = "running"
	Done     State = "done"
	Failed   State = "failed"
	Canceled State = "canceled"
)

// Terminal reports whether the job has ended.
func (s State) Terminal() bool { return s == Done || s == Failed || s == Canceled }

// Job is one job of the daemon: a spec, its owner, and the supervisor
// goroutine that runs engine.Run for it, again after every restart of
// production.
//
// Production restarts (a trainer resuming from an older cursor) and stops
// (drain, cancel) always detach the run's rings first (engine
// Progress.DetachRings) and only then cancel its context, so that the
// run's dying words ("job canceled") never reach a trainer: the next run
// adopts the rings, or the daemon writes its own message into them.
type Job struct {
	d        *Daemon
	id, name string
	owner    uint32
	gid      uint32
	groups   []uint32         // the owner's supplementary groups: files are opened as owner, gid, groups
	spill    *cpupeer.Spiller // the current run's, nil without peers
	// noSpill is why the current run has no spiller though this daemon
	// has peers (a job that cannot spill: spillFor), shown as its spill
	// decision; nil otherwise.
	noSpill   *spillView
	stager    *gpu.Stager     // the current run's device staging, nil unless gpu.staging: device (devstage.go)
	placement []gpu.Placement // per rank, set at each run's start (gpu.go); under mu
	specText  string
	pins      []pin // the Iceberg snapshots the job reads, fixed at submission
	baseDir   string
	file      string // the submitted spec's name, for errors
	worldOver int
	// hosts is the share of the world this daemon serves; local of its
	// ranks from world rank rankBase on (all of them, from 0, for one
	// host). Every per-rank slice of the job is indexed by local rank.
	hosts           engine.Hosts
	local, rankBase int
	// unitRows are the rows each unit of the plan unitRowsPlan yields, as
	// a run of a job on several hosts counted them (engine.Options.Counted),
	// kept for its later runs. Under mu.
	unitRows     []int64
	unitRowsPlan string
	// unitRowsDealt: a run of this job dealt its units by unitRows, as
	// its other hosts did (engine.Options.Dealt). Under mu.
	unitRowsDealt bool
	// shareCounts: the job counts only this host's share of the units and
	// takes the other hosts' from its trainers, through exchange
	// (counts.go). Both set once, in newJob.
	shareCounts bool
	exchange    *countExchange
	// countsKey is the hash of the spec as pinned: jobs with the same one
	// can share unit counts (Daemon.countsFor). Set once, in newJob.
	countsKey string
	// planDigest identifies the units the job's plan deals out
	// (engine.PlanDigest): the trainers of a world on several hosts
	// compare their hosts'. Under mu.
	planDigest string
	// planUnits is the number of units of that plan (0: not known yet):
	// the most unit counts the trainers may post (postCounts).
	planUnits int
	hash      string
	created   time.Time
	spec      *spec.Job
	footprint int64
	log       *slog.Logger
	client    *Client
	// finished is closed when the supervisor has returned; a revived job
	// (revive.go) gets a new one. Under mu (finishedCh), except in
	// newJob and in the supervisor it belongs to.
	finished chan struct{}

	attachMu sync.Mutex // serializes attaches, restarts and cancels

	mu         sync.Mutex
	state      State
	errMsg     string
	started    time.Time
	ended      time.Time
	weight     int // as submitted
	restarts   int
	ranks      []rankRec
	removed    bool     // rings removed
	arenas     []uint64 // the unit arenas its runs made (ring.arena), removed with the rings
	run        *run
	latest     *run            // the last run started: as run, but finish does not clear it
	next       []engine.Cursor // resume cursors of the next run
	lastActive time.Time
	obs        []*shm.Observer
	stopWhy    string // why the current run is being stopped: restart, drain, cancel
	cancelMsg  string
	saved      time.Time // last periodic persist
	// unsaved is the first failure of the persists failing since the
	// record was last written (zero: it is up to date), and unsavedErr the
	// latest; the monitor retries them every second.
	unsaved    time.Time
	unsavedErr string
	perEpoch   int64 // batches per epoch and rank + 1, as an earlier run knew it; 0: unknown
	lastEpoch  int64 // the epoch the last run that ended was producing (the view's, between runs)
	// persistMu is held by persist from the record it takes to its write
	// and the note of its outcome (unsaved): persists at once write in the
	// order they took their records, the latest last. Taken before mu.
	persistMu sync.Mutex

	// Counters of runs that ended, so that metrics and progress stay monotonic across
	// restarts of production; under mu.
	base      progressTotals
	published []uint64
	fullWait  []time.Duration
	opBase    map[string]ops.OpRows // rows in and out per op (oprows.go)
	runErrors int64
	// Sampled time each rank's consumer waited on an empty ring, in ns.
	emptyWait []atomic.Int64
}

// run is one engine.Run of a job.
type run struct {
	ctx    context.Context
	cancel context.CancelFunc
	prog   *engine.Progress
	ready  chan struct{} // closed once the rings exist
	done   chan struct{} // closed when Run has returned
	err    error
	resume []engine.Cursor
	// folded: the run's counters were added to its job's base (under
	// j.mu, once Run returned). j.run keeps pointing at it until the next
	// run starts or the job finishes, so readers that add the live run's
	// counters to base skip a folded one (liveLocked).
	folded bool
}

func (j *Job) ringName(r int) string { return j.spec.RingName(j.rankBase + r) }

func (j *Job) record() *record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.recordLocked()
}

func (j *Job) recordLocked() *record {
	sharedPlan, sharedRows, alone := j.exchange.posted() // j.mu before the exchange's lock
	return &record{
		SharedRows: sharedRows, SharedPlan: sharedPlan, CountAlone: alone,
		ID: j.id, Name: j.name, Owner: j.owner, GID: j.gid, Groups: j.groups, Spec: j.specText, BaseDir: j.baseDir, File: j.file,
		WorldSize: j.worldOver, Hosts: j.hosts.Count, Host: j.hosts.Index, ShareCounts: j.shareCounts, Weight: j.weight, Hash: j.hash, State: string(j.state), Error: j.errMsg,
		Created: j.created, Started: j.started, Ended: j.ended, Restarts: j.restarts, Footprint: j.footprint,
		Ranks: append([]rankRec(nil), j.ranks...), RingsRemoved: j.removed, Resume: j.next, Pins: j.pins,
		UnitRows: j.unitRows, UnitRowsPlan: j.unitRowsPlan, UnitRowsDealt: j.unitRowsDealt, Arenas: append([]uint64(nil), j.arenas...),
	}
}

// persist writes the job's record. A failure is not fatal: the job goes
// on, the failure is counted (lastmile_state_persist_failures_total) and
// shown in the job's status, and the monitor retries it every second
// until a write succeeds. A restart in between resumes from the previous
// record.
func (j *Job) persist() {
	j.persistMu.Lock() // and its outcome noted in order: an older success clears no newer failure
	defer j.persistMu.Unlock()
	err := j.d.store.put(j.record())
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		if !j.unsaved.IsZero() {
			j.log.Info("job state persisted again", "after", time.Since(j.unsaved).Round(time.Millisecond))
		}
		j.unsaved, j.unsavedErr = time.Time{}, ""
		return
	}
	j.d.persistFailures.Add(1)
	if j.unsaved.IsZero() {
		j.unsaved = time.Now()
		j.log.Error("persist job state; retrying every second", "err", err)
	}
	j.unsavedErr = err.Error()
}

// unsavedState says since when the job's record is behind and why, or
// "" when it is up to date.
func (j *Job) unsavedState() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.unsaved.IsZero() {
		return ""
	}
	return fmt.Sprintf("job state not saved since %s (%s ago): %s", j.unsaved.UTC().Format(time.RFC3339),
		time.Since(j.unsaved).Round(time.Second), j.unsavedErr)
}

// supervise runs production until the job ends or the daemon drains.
func (j *Job) supervise() {
	j.mu.Lock()
	unknown, finished := j.footprint == 0 || j.planDigest == "", j.finished
	j.mu.Unlock()
	defer close(finished)
	if unknown { // restored after a restart: estimate it again
		if fp, err := engine.EstimateFootprint(context.Background(), j.spec, j.fs()); err == nil {
			j.mu.Lock()
			j.footprint = fp.ForRanks(j.local).Bytes()
			j.planDigest, j.planUnits = fp.PlanDigest, fp.Units
			j.mu.Unlock()
		}
	}
	for {
		j.mu.Lock()
		resume, why := j.next, j.stopWhy
		msg := j.cancelMsg
		j.mu.Unlock()
		switch why {
		case "drain":
			return
		case "cancel":
			j.failRings(msg)
			j.finish(Canceled, msg)
			return
		}
		if startHook != nil {
			startHook(j)
		}
		r := j.startRun(resume)
		<-r.done
		j.mu.Lock()
		j.foldLocked(r)
		why = j.stopWhy
		if why == "restart" {
			j.stopWhy = ""
		}
		switch {
		case why == "restart":
			j.mu.Unlock()
			continue
		case why == "drain":
			j.mu.Unlock()
			return
		case why == "cancel":
			msg := j.cancelMsg
			j.mu.Unlock()
			j.failRings(msg)
			j.finish(Canceled, msg)
		case r.err == nil:
			j.mu.Unlock()
			j.finish(Done, "")
		default:
			j.runErrors++
			j.mu.Unlock()
			// The engine failed the rings it had; rings it never took (a
			// restart that failed to plan) would otherwise stay claimed,
			// looking alive to their trainers.
			msg := r.err.Error()
			if errors.Is(r.err, fs.ErrPermission) {
				msg = accessMsg(j.owner, r.err)
			}
			j.failRings("lastmiled: " + msg)
			j.finish(Failed, msg)
		}
		return
	}
}

// finishedCh returns the channel the current supervisor closes when it
// returns.
func (j *Job) finishedCh() chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.finished
}

// startHook, if set (tests), runs in supervise after its look at
// stopWhy, before startRun.
var startHook func(*Job)

// finishHook, if set (tests), runs in finish once the job's state is
// set and j.mu released.
var finishHook func(*Job)

func (j *Job) finish(st State, msg string) {
	j.mu.Lock()
	j.state, j.errMsg, j.ended = st, msg, time.Now()
	j.notePerEpoch(j.run)
	j.run = nil
	// Closed with the state set, under mu: a revive (revive.go), which
	// can follow as soon as mu is free, must find the client closed, or
	// its Reopen does nothing and this Close ends the revived run.
	j.client.Close()
	j.mu.Unlock()
	if finishHook != nil {
		finishHook(j)
	}
	if st == Failed {
		j.log.Error("job failed", "err", msg)
	} else {
		j.log.Info("job ended", "state", st, "reason", msg)
	}
	j.persist()
	j.d.notifyStatus()
}

// notePerEpoch keeps what run r knew of the batches per epoch for the
// runs after it and the ended job (the job view's batches_per_epoch). j.mu
// is held.
func (j *Job) notePerEpoch(r *run) {
	if r != nil {
		if n, ok := r.prog.BatchesPerEpoch(); ok {
			j.perEpoch = n + 1
		}
	}
}

// onDealt is a run's engine.Options.OnDealt: its job's later runs (a
// restart) must deal as it did. The trainers' posted list goes with the
// same write that says so (countExchange.taken), the record keeping one
// copy.
func (j *Job) onDealt() {
	j.mu.Lock()
	was := j.unitRowsDealt
	j.unitRowsDealt = len(j.unitRows) > 0
	j.mu.Unlock()
	if dropped := j.exchange.taken(); !was || dropped {
		j.persist()
	}
}

// onCounted is a run's engine.Options.Counted: the job keeps the counts
// for its later runs, and the trainers' list, if any, until the run has
// dealt by them (onDealt).
func (j *Job) onCounted(plan string, rows []int64) {
	j.log.Info("units counted for the hosts' split", "units", len(rows), "plan", plan)
	j.mu.Lock()
	j.unitRows, j.unitRowsPlan = rows, plan
	j.mu.Unlock()
	j.persist()
}

// startRun starts engine.Run with the given resume cursors.
func (j *Job) startRun(resume []engine.Cursor) *run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{ctx: ctx, cancel: cancel, prog: new(engine.Progress), ready: make(chan struct{}),
		done: make(chan struct{}), resume: resume}
	j.mu.Lock()
	j.notePerEpoch(j.run)
	j.run, j.latest = r, r
	// A stopRun between supervise's look at stopWhy and here found no run
	// to stop (a cancel right after the submission): this run stops at
	// once, and supervise then does what was asked, with the resume
	// cursors a restart's prepare left in j.next.
	stopped := j.stopWhy != ""
	if !stopped {
		j.next = resume
	}
	unitRows, unitRowsPlan, dealt := j.unitRows, j.unitRowsPlan, j.unitRowsDealt
	j.mu.Unlock()
	if stopped {
		cancel()
	}
	j.persist() // the resume cursors, before any ring is created
	opts := engine.Options{
		Logger:   j.log,
		Progress: r.prog,
		Resume:   resume,
		Gate:     j.client.Acquire,
		Ready:    func(rings []string) { j.onReady(r, rings) },
		// The unit arena's id is recorded before its file exists: a
		// daemon killed before Ready (an OOM kill while the rings are
		// pre-faulted) still removes it with the job's rings.
		ArenaClaim: j.claimArena,
		// A ring left by a previous run belongs to the job's owner.
		RingOwner: j.owner,
		FS:        j.fs(),
		PlaceRing: j.placeRing(), // each rank's ring on its GPU's NUMA node (gpu.go)
		Hosts:     j.hosts,
		// One host's share of a world counts every unit's rows once; later
		// runs of the job (restarts, trainers' cursors) reuse the counts.
		UnitRows: unitRows, UnitRowsPlan: unitRowsPlan, Dealt: dealt,
		OnDealt: j.onDealt,
		Counted: j.onCounted,
	}
	// The trainers relay the other hosts' counts (counts.go).
	opts.ShareCounts = j.shareCountsHook()
	st := j.stagerFor() // device staging (devstage.go), nil unless asked for
	if st != nil {
		opts.Stage = st
	}
	sp, noSpill := j.spillFor()
	if sp != nil {
		opts.Spill = sp
	}
	j.mu.Lock()
	if sp != nil {
		j.spill = sp
	}
	j.noSpill = noSpill
	j.mu.Unlock()
	tokens, _ := j.d.sched.Stats()
	j.log.Info("production starting", "resume", fmt.Sprint(resume), "decode_workers", j.spec.Decode.Workers, "cpu_tokens", tokens)
	go func() {
		defer close(r.done)
		defer cancel()
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("BUG: production panicked: %v", p)
				j.log.Error("production panicked", "panic", p, "stack", string(debug.Stack()))
				r.prog.FailRings("lastmiled: " + r.err.Error())
			}
		}()
		defer j.closeStager(st) // after the run, before done: its trainers read their last batches from the device slots
		_, r.err = engine.Run(ctx, j.spec, opts)
	}()
	return r
}

// claimArena records a unit arena the job's run is about to create
// (engine.Options.ArenaClaim), persisted before the file exists.
func (j *Job) claimArena(id uint64) error {
	j.mu.Lock()
	if !slices.Contains(j.arenas, id) {
		j.arenas = append(j.arenas, id)
	}
	j.mu.Unlock()
	j.persist()
	return nil
}

// onReady runs when a run's rings exist: give them to the owner, note
// which were adopted, and open observers for status and metrics.
func (j *Job) onReady(r *run, rings []string) {
	dir := j.spec.Ring.Dir
	// The unit arena the run made for the rings (ring.arena), first: a
	// trainer that opens its ring once it is given must be able to open
	// the arena. Given through its descriptor and recorded to be removed
	// with the rings; never found through a ring's header, which its
	// owner can write.
	arena, err := r.prog.ChownArena(int(j.owner), int(j.gid))
	if err != nil {
		j.log.Error("give the unit arena to its owner", "arena", shm.ArenaName(arena), "err", err)
	}
	var chowned []error
	if !j.d.ownedByDaemon(j.owner, j.gid) {
		chowned = r.prog.ChownRings(int(j.owner), int(j.gid))
	}
	obs := make([]*shm.Observer, len(rings))
	for i, name := range rings {
		if i < len(chowned) && chowned[i] != nil {
			j.log.Error("give ring to its owner (lastmiled needs CAP_CHOWN)", "rank", i, "ring", name, "err", chowned[i])
		}
		o, err := shm.Observe(dir, name)
		if err != nil {
			j.log.Warn("observe ring", "rank", i, "ring", name, "err", err)
			continue
		}
		obs[i] = o
	}

	j.mu.Lock()
	if arena != 0 && !slices.Contains(j.arenas, arena) {
		j.arenas = append(j.arenas, arena)
	}
	old := j.obs
	j.obs = obs
	for i, o := range obs {
		if o == nil || i >= len(j.ranks) {
			continue
		}
		gen := o.Header().Generation
		if gen != j.ranks[i].Generation {
			// A new ring: its batch 0 is the resume cursor.
			if i < len(r.resume) {
				j.ranks[i].Start = r.resume[i]
			} else {
				j.ranks[i].Start = engine.Cursor{}
			}
			j.ranks[i].Generation = gen
			j.log.Info("ring created", "rank", i, "ring", rings[i], "generation", gen, "start", j.ranks[i].Start)
		} else {
			j.log.Info("ring adopted", "rank", i, "ring", rings[i], "generation", gen)
		}
	}
	if j.state == Pending {
		j.state = Running
		if j.started.IsZero() {
			j.started = time.Now()
		}
	}
	j.lastActive = time.Now()
	j.mu.Unlock()
	for _, o := range old {
		if o != nil {
			o.Close()
		}
	}
	j.persist()
	close(r.ready)
	j.d.notifyStatus()
}

// stopRun hands the current run's rings over (so nothing the run does
// while it dies reaches a trainer), calls prepare with the rings' state at
// the hand-over (nil if the run had no rings yet), cancels the run and
// waits for it. why tells the supervisor what to do next: "restart",
// "drain" or "cancel". Without a run (between two runs) it only records
// why, which the supervisor checks before starting the next.
func (j *Job) stopRun(why string, prepare func([]shm.RingInfo)) error {
	j.mu.Lock()
	if j.state.Terminal() {
		j.mu.Unlock()
		return errors.New("job has ended")
	}
	r := j.run
	j.stopWhy = why
	j.mu.Unlock()
	if r == nil {
		return nil
	}
	var infos []shm.RingInfo
	var err error
	select {
	case <-r.ready:
		infos, err = r.prog.DetachRings()
	default:
	}
	if prepare != nil {
		prepare(infos)
	}
	r.cancel()
	<-r.done
	return err
}

// fs is where the job's files come from: opened with the owner's
// credentials, so that the kernel decides what lastmiled may read for
// them, after a restart as at submission; s3:// objects within the
// prefixes the config's s3.allow grants the owner (s3.go).
func (j *Job) fs() decode.FS {
	return j.d.readerFS(asuser.Cred{UID: j.owner, GID: j.gid, Groups: j.groups})
}

var _ decode.LocalFS = asuser.FS{}
