package peer

// The side tables a cached job read as its user while it compiled, and
// the check that the user may still read each and that each is still
// what was read.
//
// A compiled job keeps its side tables loaded for the units that follow,
// of its run and of the next runs of the same spec by the same user: it
// opens them no more, so neither the kernel nor the object store is
// asked again. A chmod or chown that took the user's access away, a file
// or object replaced under the same name, or a file added to the
// directory or glob a table names, went unseen for as long as the job
// stayed cached, and the peer joined its stale copy into every unit: the
// requester, running a unit itself, joined the table as it is now, so
// the two computed other rows, and verification could quarantine an
// honest peer as a liar. Before a cached job serves a unit, the cache
// checks its side tables again, at most once every sideRecheck per job.
//
// What the compile records (rootsFS, compileContext):
//   - each file it opened beneath a directory root: its device, inode,
//     size and modification time (fileID);
//   - each object it opened beneath an object-store root: its size,
//     Last-Modified and ETag as the open saw them (objVersion);
//   - each side table named as a directory, a prefix or a glob: the names
//     it expands to (decode.ExpandInputs through the user's rootsFS),
//     listed before the compile, so that a file added between the listing
//     and the planner's own is seen by the first check (a job compiled
//     again for nothing), never missed.
//
// The check (sideFiles.check) reopens each file as the user (cred.Do:
// the kernel says whether they may), expands each directory, prefix or
// glob again (a ReadDir per directory, a LIST per prefix, through the
// user's objects, which refuse what their s3.allow grant no longer
// gives), and asks the store for each object's version: the LIST of
// its table vouches for one it gives as read (size and ETag; size and
// Last-Modified where the object had no ETag when read), a HEAD decides
// for any other. Another identity, another version, another set of
// names, or a refusal, and the job leaves the cache; its next unit
// compiles it again, as the user.
//
// What a check costs the store: a LIST per 1,000 objects beneath each
// prefix or glob table (a glob is listed from its literal part:
// "ctr/*/dim.parquet" lists all of ctr), and a HEAD per object of a
// table named as one object, or listed otherwise than read. A cached
// job whose units keep coming is checked every sideRecheck: for a
// prefix of 1,000 objects, 30 LISTs a minute per cached job (at most 8
// per peer), where a HEAD per object would be 30,000, and would not fit
// in sideCheckTimeout.
//
// Why by time and not by run: a ticket names its job's spec (Hash), its
// user, its columns (Plan) and its unit, and nothing that tells one run
// of a spec from the next; the next run's tickets are the same bytes but
// for their units. A check per unit would cost an open, an fstat and a
// switch of credentials per side table file, and a request per object,
// for every unit, which is what the cache is there to avoid. So a
// change is seen by the first unit that comes more than sideRecheck
// after the job's last check: within one run, and a new run in any case
// when more than sideRecheck passed since the last unit of the one
// before. The steady state of a run costs each unit a read of the
// monotonic clock (no system call, no request); one unit every
// sideRecheck pays for the check.
//
// A check that cannot be made. The requests of a check are bounded by
// sideCheckTimeout (and by the unit's own context): an unreachable or
// hanging store must not hold the unit for ever; the units of the job
// queued behind its check wait for it only as long as their own
// contexts allow (checking). The kernel's opens and ReadDirs of a
// check of files are not bounded (a system call is not cancelled): a
// hung file system holds the unit making the check, as it would that
// unit's reads of its own file. A check that fails for another reason
// than an answer (a timeout, a 5xx after the client's retries, a
// network error, an I/O error) is not a change: one lost request must
// not recompile a job, which reads every side table again from the same
// troubled store (unless the job was idle for more than sideGrace, as
// between two runs: its tables were last vouched for too long ago). So the job serves on from the tables its last good
// check vouched for, and is checked again sideRecheck later; but for no
// more than sideGrace after that last good check: a job whose tables
// could not be checked for that long leaves the cache, as a changed one
// does, and its compile then succeeds (the store is back) or fails (its
// units are refused, and the requester runs them itself). A stale table
// is thus joined at most sideRecheck + sideGrace (plus a check's
// timeout) after it changed, whatever the store does. An answer is a
// change: not found, refused (fs.ErrPermission: the kernel's or the
// grant's), or another identity or set of names.
//
// Rejected: a per-run identity in the ticket (a new field, which a peer
// must not trust to be new: a requester may send the same one for ever,
// so a time bound was needed anyway); watching the files with inotify
// (no event for a change of a directory's permissions above the file,
// nor for a group membership the user lost, a descriptor per file, and
// nothing of the kind for an object store); conditional reads of the
// objects (If-None-Match on a GET of the footer: the same request as a
// HEAD, with a body); dropping a job at its first failed check (a
// transient error flaps the cache: every blip recompiles every job whose
// tables are in the store); serving on for ever when the store cannot
// be asked (a store that answers no HEAD but still serves a replaced
// object to the requester would keep the stale copy joined without
// bound).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/spec"
)

// sideRecheck is the most time a cached job serves units without its
// side tables being checked again (a variable for tests).
var sideRecheck = 2 * time.Second

// sideCheckTimeout bounds one check's requests to the object store
// (HEADs and LISTs), not its system calls (a variable for tests).
var sideCheckTimeout = 5 * time.Second

// sideGrace is how long after its last good check a job whose side
// tables cannot be checked (the store unreachable) still serves units (a
// variable for tests).
var sideGrace = 15 * time.Second

// fileID is what tells one file from another, or from itself changed:
// its device and inode, its size and its modification time.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    int64 // nanoseconds
}

func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, true
}

// objVersion is what tells one version of an object from another: its
// size, its Last-Modified and its ETag (the FileInfo's Sys, as
// objstore's Stat gives it).
type objVersion struct {
	size  int64
	mtime int64 // nanoseconds since the epoch
	etag  string
}

func versionOf(fi fs.FileInfo) objVersion {
	etag, _ := fi.Sys().(string)
	return objVersion{size: fi.Size(), mtime: fi.ModTime().UnixNano(), etag: etag}
}

// sideFiles records the side tables of a job's compile, then checks
// them. Safe for concurrent use.
type sideFiles struct {
	fsys rootsFS // the user's, recording nothing
	cred asuser.Cred
	// unit is the ticket's unit file: opened afresh by every unit, not
	// recorded, unless a side table is it too (noteTables clears it).
	unit string

	sealed atomic.Bool // the compile is over: opens are not recorded

	// checking is held by the check in progress (fresh), before mu: a
	// unit waiting for another's check gives up when its own context
	// ends, not when the check does.
	checking chan struct{}

	mu       sync.Mutex
	files    map[string]fileID     // by ROOT/REL name
	objects  map[string]objVersion // by ROOT/REL name
	listings map[string][]string   // a directory or glob table: what it expands to
	err      error                 // the check that failed: it fails for good
	good     int64                 // nanoseconds after base of the last good check (or of the seal)

	base    time.Time    // the monotonic origin of checked
	checked atomic.Int64 // nanoseconds after base of the last check (or of the seal)
	checks  atomic.Int64 // checks made (tests)
	failed  atomic.Int64 // checks that could not be made (tests)
}

func newSideFiles(fsys rootsFS, unit string) *sideFiles {
	fsys.side = nil
	return &sideFiles{fsys: fsys, cred: fsys.user.cred(), unit: unit, base: time.Now(), checking: make(chan struct{}, 1),
		files: map[string]fileID{}, objects: map[string]objVersion{}, listings: map[string][]string{}}
}

// recording reports whether name is to be recorded now.
func (s *sideFiles) recording(name string) bool {
	return s != nil && !s.sealed.Load() && name != s.unit
}

// note records name, a file opened as f, unless the compile is over
// (then it costs no system call). A file whose identity cannot be read
// is recorded as the zero fileID, which no check matches: its job is
// compiled again at its first check.
func (s *sideFiles) note(name string, f interface{ Stat() (fs.FileInfo, error) }) {
	if !s.recording(name) {
		return
	}
	var id fileID
	if fi, err := f.Stat(); err == nil {
		id, _ = idOf(fi)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sealed.Load() {
		s.files[name] = id
	}
}

// noteObject records name, an object opened as f. An object opened twice
// in two versions, or whose version cannot be read, is recorded as the
// zero objVersion, which no check matches.
func (s *sideFiles) noteObject(name string, f decode.File) {
	if !s.recording(name) {
		return
	}
	var v objVersion
	if fi, err := f.Stat(); err == nil {
		v = versionOf(fi)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed.Load() {
		return
	}
	if old, ok := s.objects[name]; ok && old != v {
		v = objVersion{}
	}
	s.objects[name] = v
}

// noteTables records what each of job's side tables that names a
// directory, a prefix or a glob expands to now, as the user; a table
// that is one file or object is checked as such (note, noteObject). A
// table that is, or holds, the unit's file makes that file recorded as
// the others are: the job, loaded with it, serves other units. It runs
// before the compile opens anything. An Iceberg table never gets here:
// a requester does not spill its job (portableJob), and
// "iceberg:ROOT/..." names no root, so the compile refuses a ticket
// naming one before any read.
func (s *sideFiles) noteTables(ctx context.Context, job *spec.Job) error {
	if s == nil {
		return nil
	}
	for _, op := range job.Pipeline {
		if op.Kind != "join" || op.Join == nil || iceberg.IsRef(op.Join.Table) {
			continue
		}
		table := op.Join.Table
		names, err := decode.ExpandInputs(ctx, s.fsys, []string{table})
		if err != nil {
			return fmt.Errorf("side table %s: %w", table, err)
		}
		if slices.Contains(names, s.unit) {
			s.unit = ""
		}
		if len(names) == 1 && names[0] == table {
			continue
		}
		s.mu.Lock()
		s.listings[table] = names
		s.mu.Unlock()
	}
	return nil
}

// seal ends the recording: the side tables are those the compile read,
// and the next check is due sideRecheck from now. It returns how many
// things there are to check: a job with none (no side table: a peer
// refuses an Iceberg one, which is no ROOT/REL name) needs no check.
func (s *sideFiles) seal() int {
	s.mu.Lock()
	s.sealed.Store(true)
	n := len(s.files) + len(s.objects) + len(s.listings)
	now := int64(time.Since(s.base))
	s.good = now
	s.mu.Unlock()
	s.checked.Store(now)
	return n
}

// fresh returns nil when the side tables were checked less than
// sideRecheck ago, or when they check now: the user may read each (as
// the kernel or their grant says) and each is what the compile read.
// Otherwise the error, for this call and every later one: the job is to
// be compiled again. A check that could not be made is not an error
// until sideGrace after the last good one: unchecked says why, for the
// caller to log. A check that ctx ended is neither: its error is ctx's,
// and the next caller checks at once.
func (s *sideFiles) fresh(ctx context.Context) (unchecked, err error) {
	if s == nil {
		return nil, nil
	}
	if time.Duration(int64(time.Since(s.base))-s.checked.Load()) < sideRecheck {
		return nil, nil
	}
	select {
	case s.checking <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.checking }()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	now := int64(time.Since(s.base))
	if time.Duration(now-s.checked.Load()) < sideRecheck { // another caller checked meanwhile
		return nil, nil
	}
	s.checks.Add(1)
	err = s.check(ctx)
	switch {
	case err == nil:
		s.good = now
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !answered(err):
		s.failed.Add(1)
		if time.Duration(now-s.good) <= sideGrace {
			s.checked.Store(now)
			return err, nil
		}
		s.err = fmt.Errorf("not checked for %v (its last check: %w)", time.Duration(now-s.good).Round(time.Second), err)
		return nil, s.err
	default:
		s.err = err
		return nil, err
	}
	s.checked.Store(now)
	return nil, nil
}

// answered reports whether err is the answer of a check, not the
// failure to make it: a change, a file or object not found, a refusal.
func answered(err error) bool {
	return errors.Is(err, errSideChanged) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// errSideChanged is the error of a side table that is no longer what a
// cached job read.
var errSideChanged = errors.New("changed since the job was compiled")

// check makes one check within sideCheckTimeout. s.mu is held.
func (s *sideFiles) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sideCheckTimeout)
	defer cancel()
	if len(s.files) > 0 {
		if err := s.cred.Do(s.checkFiles); err != nil {
			return err
		}
	}
	listed, err := s.checkListings(ctx)
	if err != nil {
		return err
	}
	return s.checkObjects(ctx, listed)
}

// checkFiles opens each file beneath its root, with the caller's
// credentials (cred.Do), and compares it with what was read. s.mu is held.
func (s *sideFiles) checkFiles() error {
	for name, want := range s.files {
		f, err := s.fsys.r.Open(name)
		if err != nil {
			return fmt.Errorf("side table %s: %w", name, err)
		}
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			return fmt.Errorf("side table %s: %w", name, err)
		}
		if got, ok := idOf(fi); !ok || got != want || want == (fileID{}) {
			return fmt.Errorf("side table %s: %w", name, errSideChanged)
		}
	}
	return nil
}

// checkObjects asks the store for each object's version, through the
// user's objects, and compares it with what was read: an object this
// check's listings gave as the version read is vouched for by them;
// any other (not listed, listed otherwise, or without the ETag it was
// read with) is asked for with a HEAD, whose answer decides, so that a
// store whose listings say less, or say it otherwise, costs HEADs, not
// a job compiled again at every check. s.mu is held.
func (s *sideFiles) checkObjects(ctx context.Context, listed map[string]objVersion) error {
	for name, want := range s.objects {
		if got, ok := listed[name]; ok && want.listedAs(got) {
			continue
		}
		fi, err := s.fsys.statContext(ctx, name)
		if err != nil {
			return fmt.Errorf("side table %s: %w", name, err)
		}
		if got := versionOf(fi); got != want || want == (objVersion{}) {
			return fmt.Errorf("side table %s: %w (size %d, Last-Modified %d, ETag %q; read as %d, %d, %q)",
				name, errSideChanged, got.size, got.mtime, got.etag, want.size, want.mtime, want.etag)
		}
	}
	return nil
}

// listedAs reports whether got, an object's version as a listing gave
// it, is v, read by a GET: the same size, and the same ETag, or without
// one the same Last-Modified to the second (a listing's has
// milliseconds, a GET's none).
func (v objVersion) listedAs(got objVersion) bool {
	if v == (objVersion{}) || got.size != v.size {
		return false
	}
	if v.etag != "" {
		return got.etag == v.etag
	}
	sec := int64(time.Second)
	return got.mtime/sec == v.mtime/sec
}

// checkListings expands each directory, prefix or glob table again, as
// the user, and compares the names with what the compile listed. It
// returns the versions of the objects its LISTs gave, by name, for
// checkObjects. s.mu is held.
func (s *sideFiles) checkListings(ctx context.Context) (map[string]objVersion, error) {
	listed := map[string]objVersion{}
	fsys := s.fsys
	fsys.listed = func(name string, fi fs.FileInfo) { listed[name] = versionOf(fi) }
	for table, want := range s.listings {
		got, err := decode.ExpandInputs(ctx, fsys, []string{table})
		if err != nil {
			return nil, fmt.Errorf("side table %s: %w", table, err)
		}
		if !slices.Equal(got, want) {
			return nil, fmt.Errorf("side table %s: %w (%d files, %d when compiled)", table, errSideChanged, len(got), len(want))
		}
	}
	return listed, nil
}
