package peer

// The compiled jobs a peer keeps (jobCache): each ticket's job is parsed
// and compiled once, against the requester's columns, read as the
// ticket's user through the peer's roots, and kept for the units that
// follow; their side tables count against the peer's max_memory
// (budget.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/roots"
	"github.com/lastmile/lastmile/spec"
)

// jobCache keeps the compiled jobs of the last few tickets' specs.
type jobCache struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*cachedJob
	clock int64
	// sem bounds the jobs compiling at once (nil: no bound).
	sem chan struct{}
	// compiling counts the compiles in progress, canceled ones included:
	// closeAll waits for them, so that none reads the roots once the
	// server has stopped (and its owner closed them).
	compiling sync.WaitGroup
	// resident counts a compiled job's side tables against the peer's
	// max_memory (delta > 0) and gives them back (delta < 0) when the job
	// is closed (budget.go). nil: not counted.
	resident func(delta int64)
}

type cachedJob struct {
	ready chan struct{}
	up    *engine.UnitProcessor
	err   error
	used  int64
	refs  int // callers using up now
	// waiting is the callers waiting for the compile; cancel stops it,
	// once none is left.
	waiting int
	cancel  context.CancelFunc
	evicted bool // out of the cache: closed when refs drops to 0
	// outPerRow is the float64 bits of the last unit's output bytes per
	// input row: part of the next unit's memory estimate (budget.go).
	outPerRow atomic.Uint64
	// rowBytes is the least output bytes of a row, by the job's output
	// columns (set before ready is closed): what the units of a job no
	// unit of which has been computed yet are estimated at.
	rowBytes float64
	// side is the memory its side tables hold (UnitProcessor.SideMemory),
	// counted as resident from its compile to its close; under the
	// cache's mu, refreshed after each of its units (refreshSide).
	side   int64
	closed bool
	// files are the side tables its compile read as its user (files,
	// objects, listings), checked again before it serves more units
	// (sidefiles.go);
	// set before ready is closed.
	files *sideFiles
}

// refreshSide counts j's side tables again, after a unit of it computed:
// a bucket join loads and evicts buckets as its units need them.
func (c *jobCache) refreshSide(j *cachedJob) {
	if c.resident == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if j.up == nil || j.closed {
		return
	}
	if now := j.up.SideMemory(); now != j.side {
		c.resident(now - j.side)
		j.side = now
	}
}

// closeLocked closes j's processor, once, and gives back its side
// tables' memory. c.mu is held.
func (c *jobCache) closeLocked(j *cachedJob) {
	if j.up == nil || j.closed {
		return
	}
	j.closed = true
	j.up.Close()
	if c.resident != nil && j.side > 0 {
		c.resident(-j.side)
	}
}

// get returns the compiled job of t, compiling it (once, whatever the
// number of concurrent callers) against t's unit's file, and the function
// to call when done with it. A cached job whose side tables its user may
// no longer read, or that are not what it read, or that could not be
// checked for sideGrace, leaves the cache (sideFiles.fresh), and t's job
// compiles again: as the user, so
// that a table they may no longer read fails the compile (fs.ErrPermission).
func (c *jobCache) get(ctx context.Context, log *slog.Logger, t *Ticket, r rootsFS, workers int) (*cachedJob, func(), error) {
	for try := 0; ; try++ {
		j, done, err := c.lookup(ctx, log, t, r, workers)
		if err != nil {
			return nil, nil, err
		}
		unchecked, err := j.files.fresh(ctx)
		if unchecked != nil {
			log.Warn("a cached job's side tables could not be checked: serving from them until their grace ends",
				"uid", t.User.UID, "grace", sideGrace, "err", unchecked)
		}
		if err == nil {
			return j, done, nil
		}
		if ctx.Err() != nil {
			done()
			return nil, nil, ctx.Err()
		}
		c.drop(t.planKey(), j)
		done()
		if try > 0 { // changed again since the compile just made
			return nil, nil, fmt.Errorf("compile job: %w", err)
		}
		log.Info("a cached job's side table changed, or its user may no longer read it, or it could not be checked for too long: compiling the job again",
			"uid", t.User.UID, "err", err)
	}
}

// drop takes j out of the cache, where it is still under key: it is
// closed once its last caller is done.
func (c *jobCache) drop(key string, j *cachedJob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j.evicted = true
	if c.byKey[key] == j {
		delete(c.byKey, key)
	}
}

// lookup is get without the check of the cached job's side tables.
func (c *jobCache) lookup(ctx context.Context, log *slog.Logger, t *Ticket, r rootsFS, workers int) (*cachedJob, func(), error) {
	if _, _, err := roots.Split(t.Unit.File); err != nil {
		return nil, nil, fmt.Errorf("unit file: %w", err)
	}
	c.mu.Lock()
	if c.byKey == nil {
		c.byKey = map[string]*cachedJob{}
	}
	c.clock++
	key := t.planKey()
	j, ok := c.byKey[key]
	if !ok {
		c.evictLocked()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		j = &cachedJob{ready: make(chan struct{}), cancel: cancel}
		c.byKey[key] = j
		c.compiling.Add(1)
		go c.compileInto(cctx, j, key, log, t, r, workers)
	}
	j.used = c.clock
	j.refs++
	j.waiting++
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		j.refs--
		if j.refs == 0 && j.evicted {
			c.closeLocked(j)
		}
		c.mu.Unlock()
	}
	select {
	case <-j.ready:
		c.mu.Lock()
		j.waiting--
		c.mu.Unlock()
		if j.err != nil {
			done()
			return nil, nil, j.err
		}
		return j, done, nil
	case <-ctx.Done():
		c.mu.Lock()
		if j.waiting--; j.waiting == 0 {
			select {
			case <-j.ready:
			default:
				// Nobody waits for the compile any more: it stops, and
				// the job's next unit compiles it afresh.
				j.cancel()
				j.evicted = true // closed once its last caller is done, if it compiled after all
				if c.byKey[key] == j {
					delete(c.byKey, key)
				}
			}
		}
		c.mu.Unlock()
		done()
		return nil, nil, ctx.Err()
	}
}

// compileInto compiles t's job into j, cached under key, within cctx, and
// closes j.ready. r records, as the compile reads them, the files its
// job's units are then checked against (sideFiles).
func (c *jobCache) compileInto(cctx context.Context, j *cachedJob, key string, log *slog.Logger, t *Ticket, r rootsFS, workers int) {
	defer c.compiling.Done()
	defer j.cancel()
	files := newSideFiles(r, t.Unit.File)
	r.side = files
	var up *engine.UnitProcessor
	var err error
	// At most cap(sem) jobs compile at once; one whose every
	// unit was given up on meanwhile does not compile at all.
	if c.sem == nil {
		up, err = compileSafely(cctx, log, t, r, workers)
	} else {
		select {
		case c.sem <- struct{}{}:
			up, err = compileSafely(cctx, log, t, r, workers)
			<-c.sem
		case <-cctx.Done():
			err = cctx.Err()
		}
	}
	if up != nil && cctx.Err() != nil {
		up.Close()
		up, err = nil, cctx.Err()
	}
	if files.seal() == 0 {
		files = nil // nothing to check
	}
	c.mu.Lock()
	j.up, j.err, j.files = up, err, files
	if up != nil {
		j.rowBytes = outRowBytes(up.Fields())
		if j.side = up.SideMemory(); c.resident != nil && j.side > 0 {
			c.resident(j.side)
		}
	}
	if err != nil && c.byKey[key] == j {
		delete(c.byKey, key)
	}
	if j.evicted && j.refs == 0 {
		c.closeLocked(j)
	}
	c.mu.Unlock()
	close(j.ready)
}

func (c *jobCache) evictLocked() {
	for len(c.byKey) >= c.max {
		var old string
		for k, j := range c.byKey {
			if old == "" || j.used < c.byKey[old].used {
				old = k
			}
		}
		j := c.byKey[old]
		j.evicted = true
		if j.refs == 0 {
			c.closeLocked(j)
		}
		delete(c.byKey, old)
	}
}

// forget drops every job from the cache: a job in use is closed by its
// last caller, one compiling is closed once compiled and used (its
// waiters came before), and the next unit of each compiles it again.
func (c *jobCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, j := range c.byKey {
		j.evicted = true
		if j.refs == 0 {
			c.closeLocked(j)
		}
		delete(c.byKey, k)
	}
}

func (c *jobCache) closeAll() {
	c.mu.Lock()
	for k, j := range c.byKey {
		j.evicted = true
		if j.cancel != nil {
			j.cancel() // a compile in progress stops
		}
		if j.refs == 0 {
			c.closeLocked(j)
		}
		delete(c.byKey, k)
	}
	c.mu.Unlock()
	c.compiling.Wait()
}

// compileSafely is compile on a goroutine of its own: a panic while
// compiling a requester's job (a bug, or columns no check foresaw) fails
// that job's units with an error, logged with its stack, instead of
// ending the daemon, as computeUnit does for one unit.
func compileSafely(ctx context.Context, log *slog.Logger, t *Ticket, r rootsFS, workers int) (up *engine.UnitProcessor, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("compiling a requester's job panicked", "file", t.Unit.File, "panic", p, "stack", string(debug.Stack()))
			up, err = nil, fmt.Errorf("%w: %v", errCompilePanic, p)
		}
	}()
	if compileHook != nil {
		compileHook()
	}
	return compileContext(ctx, t, r, workers)
}

// errCompilePanic is the error of a compile that panicked: the
// requester's fault or not, a bug of this peer (codes.Internal).
var errCompilePanic = errors.New("BUG: compiling the job panicked")

// compileHook, when set (by tests), runs before each compile.
var compileHook func()

// compile parses t's job and compiles it against the requester's columns
// where t carries them, else against t's unit's file, read through the
// roots.
func compile(t *Ticket, r rootsFS, workers int) (*engine.UnitProcessor, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return compileContext(ctx, t, r, workers)
}

// compileContext is compile within ctx.
func compileContext(ctx context.Context, t *Ticket, r rootsFS, workers int) (*engine.UnitProcessor, error) {
	job, err := spec.Parse("", []byte(t.Job))
	if err != nil {
		return nil, err
	}
	for _, op := range job.Pipeline {
		if op.Kind == "join" {
			if _, _, err := roots.Split(op.Join.Table); err != nil {
				return nil, fmt.Errorf("side table %s: %w", op.Join.Table, err)
			}
		}
	}
	// Listed before the compile plans them: a file added meanwhile makes
	// the job's first check compile it again, never goes unseen.
	if err := r.side.noteTables(ctx, job); err != nil {
		return nil, err
	}
	job.Inputs = []string{t.Unit.File}
	if len(t.Plan) == 0 {
		return engine.NewFileProcessor(ctx, job, r, workers)
	}
	var cols PlanColumns
	if err := json.Unmarshal(t.Plan, &cols); err != nil {
		return nil, fmt.Errorf("the requester's columns: %w", err)
	}
	return engine.NewUnitProcessorOf(ctx, job, cols.Fields, cols.Partitions, r, workers)
}
