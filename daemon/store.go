package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
	"golang.org/x/sys/unix"
)

// record is a job as persisted in STATE_DIR/jobs/ID.json: everything the
// daemon needs to resume the job after a restart, kill -9 included. The
// rings themselves (in /dev/shm) hold where each rank stands; the record
// holds where each ring started and the last consumer cursor seen, for a
// ring that no longer exists.
type record struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Owner   uint32 `json:"owner"`
	GID     uint32 `json:"gid"`
	// Groups are the owner's supplementary groups at submission: files
	// are opened with Owner, GID and Groups, after a restart too.
	Groups    []uint32 `json:"groups,omitempty"`
	Spec      string   `json:"spec"`
	BaseDir   string   `json:"base_dir,omitempty"`
	File      string   `json:"file,omitempty"`
	WorldSize int      `json:"world_size_override,omitempty"`
	// Hosts and Host: the world runs on Hosts hosts and this daemon
	// serves host Host's ranks (engine.Hosts); 0 and 0 for one host.
	Hosts int `json:"hosts,omitempty"`
	Host  int `json:"host,omitempty"`
	// ShareCounts: the trainers relay the hosts' unit counts (counts.go).
	ShareCounts bool `json:"share_counts,omitempty"`
	// SharedRows and SharedPlan: the unit counts the trainers posted, and
	// the plan they are for (counts.go), kept until a run takes them.
	SharedRows []int64 `json:"shared_rows,omitempty"`
	SharedPlan string  `json:"shared_plan,omitempty"`
	// CountAlone: the trainers could not relay the counts, and asked this
	// host to count every unit itself.
	CountAlone bool `json:"count_alone,omitempty"`
	// UnitRows and UnitRowsPlan: the rows each unit of a plan yields, as a
	// run of a job on several hosts counted them, for its later runs.
	UnitRows     []int64 `json:"unit_rows,omitempty"`
	UnitRowsPlan string  `json:"unit_rows_plan,omitempty"`
	// UnitRowsDealt: a run of this job dealt its units by UnitRows, as
	// the other hosts did (engine.Options.Dealt).
	UnitRowsDealt bool      `json:"unit_rows_dealt,omitempty"`
	Weight        int       `json:"weight"`
	Hash          string    `json:"spec_hash"`
	State         string    `json:"state"`
	Error         string    `json:"error,omitempty"`
	Created       time.Time `json:"created"`
	Started       time.Time `json:"started,omitzero"`
	Ended         time.Time `json:"ended,omitzero"`
	Restarts      int       `json:"restarts"`
	// Footprint is the memory the job is charged while it holds rings: a
	// done job restored with its rings in place is charged it (and a
	// trainer may revive it, revive.go) before any supervisor estimates
	// it again.
	Footprint int64     `json:"footprint,omitempty"`
	Ranks     []rankRec `json:"ranks"`
	// Resume is the resume cursors the latest production run started
	// with: the start of any ring it created before its generation was
	// recorded (a crash in between).
	Resume []engine.Cursor `json:"resume,omitempty"`
	// RingsRemoved: the job's rings were removed (it ended and drained,
	// or its grace period ran out).
	RingsRemoved bool `json:"rings_removed,omitempty"`
	// Arenas are the unit arenas the job's runs created (ring.arena),
	// removed with its rings.
	Arenas []uint64 `json:"arenas,omitempty"`
	// Pins are the snapshots of the job's Iceberg tables, fixed when it
	// was accepted: the job and its cursors belong to these snapshots.
	Pins []pin `json:"pins,omitempty"`
}

// rankRec is one rank's resume state.
type rankRec struct {
	// Start is the cursor of the batch the rank's current ring began with
	// (its sequence 0).
	Start engine.Cursor `json:"start"`
	// Next is the next batch the rank's trainer needs, as last seen (the
	// ring's head), nil if never seen.
	Next *engine.Cursor `json:"next,omitempty"`
	// Generation of the rank's current ring, 0 if none yet.
	Generation uint64 `json:"generation,omitempty"`
	// PastEnd: the rank's trainer asked for a batch past the job's last
	// epoch, and has not attached since (Job.pastEnd). Not persisted.
	PastEnd bool `json:"-"`
}

const recordVersion = 1

// store persists records atomically: write a temporary file, fsync it,
// rename it over the record, fsync the directory. A crash at any point
// leaves either the old record or the new one, never a torn one.
//
// A write never depends on a free file descriptor at the moment it runs
// (issue: idle control clients used up the daemon's descriptors and job
// state stopped being saved). The store holds two descriptors from the
// start: the jobs directory, which every create, rename and directory
// fsync goes through (openat, renameat, fsync of the held descriptor), and
// a reserve (/dev/null). A write whose openat fails for want of a
// descriptor (EMFILE, ENFILE) gives the reserve back to the kernel, opens
// its temporary file in the slot that frees, and takes the reserve again
// once the file is closed. Writes are serialized, so one reserve serves
// them all. A thread that grabs the freed slot in between (an accept on
// another thread, say) makes that one write fail; the job retries it
// (Job.persist), and the failure is counted and shown.
type store struct {
	dir     string // STATE_DIR/jobs
	mu      sync.Mutex
	dirfd   int
	reserve int // -1 while given back
	// wrote, if not nil, is called with each record written, in the
	// order they are (under mu): a test sees every record a kill could
	// leave behind.
	wrote func(data []byte)
}

func openStore(stateDir string) (*store, error) {
	dir := filepath.Join(stateDir, "jobs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// Temporary files of writes a crash interrupted.
	tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	for _, t := range tmps {
		os.Remove(t)
	}
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	s := &store{dir: dir, dirfd: dirfd, reserve: -1}
	s.takeReserve()
	return s, nil
}

// close gives the store's descriptors back.
func (s *store) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
	}
	if s.dirfd >= 0 {
		unix.Close(s.dirfd)
		s.dirfd = -1
	}
}

func (s *store) takeReserve() {
	if s.reserve >= 0 {
		return
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.reserve = fd
	}
}

// put writes rec atomically.
func (s *store) put(rec *record) error {
	if err := validID(rec.ID); err != nil {
		return fmt.Errorf("persist job: state store: %w", err)
	}
	rec.Version = recordVersion
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("persist job %s: %w", rec.ID, err)
	}
	data = append(data, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirfd < 0 {
		return fmt.Errorf("persist job %s: state store closed", rec.ID)
	}
	tmp := "." + rec.ID + ".tmp"
	if err := s.write(tmp, data); err != nil {
		unix.Unlinkat(s.dirfd, tmp, 0)
		return fmt.Errorf("persist job %s: %w", rec.ID, err)
	}
	if err := unix.Renameat(s.dirfd, tmp, s.dirfd, rec.ID+".json"); err != nil {
		unix.Unlinkat(s.dirfd, tmp, 0)
		return fmt.Errorf("persist job %s: rename: %w", rec.ID, err)
	}
	if err := unix.Fsync(s.dirfd); err != nil {
		return fmt.Errorf("persist job %s: sync %s: %w", rec.ID, s.dir, err)
	}
	if s.wrote != nil {
		s.wrote(data)
	}
	return nil
}

// write creates name in the directory with data, fsynced, using the
// reserve descriptor when no other is free. Callers hold s.mu.
func (s *store) write(name string, data []byte) error {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(s.dirfd, name, flags, 0o600)
	if (err == unix.EMFILE || err == unix.ENFILE) && s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
		fd, err = unix.Openat(s.dirfd, name, flags, 0o600)
	}
	if err != nil {
		s.takeReserve()
		return fmt.Errorf("create %s: %w", filepath.Join(s.dir, name), err)
	}
	for rest := data; len(rest) > 0 && err == nil; {
		var n int
		n, err = unix.Write(fd, rest)
		if err == nil && n == 0 {
			err = unix.EIO // no progress and no error: do not spin
		}
		if err != nil {
			break // n is -1 with an error (ENOSPC, EDQUOT, EFBIG, EIO)
		}
		rest = rest[n:]
	}
	if err == nil {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	s.takeReserve()
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(s.dir, name), err)
	}
	return nil
}

// remove forgets a job.
func (s *store) remove(id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("forget job: state store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirfd < 0 {
		return fmt.Errorf("forget job %s: state store closed", id)
	}
	if err := unix.Unlinkat(s.dirfd, id+".json", 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("forget job %s: %w", id, err)
	}
	if err := unix.Fsync(s.dirfd); err != nil {
		return fmt.Errorf("forget job %s: sync %s: %w", id, s.dir, err)
	}
	return nil
}

// load reads every record. Unreadable records are reported and skipped,
// never fatal: one bad file must not keep the daemon from starting.
func (s *store) load() ([]*record, []error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, []error{fmt.Errorf("read state directory: %w", err)}
	}
	var out []*record
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if rec.Version != recordVersion || rec.ID+".json" != name {
			errs = append(errs, fmt.Errorf("%s: not a version %d record of that id", name, recordVersion))
			continue
		}
		if err := checkRecordNames(&rec); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		out = append(out, &rec)
	}
	return out, errs
}

// checkRecordNames refuses a record whose id or name could not have been
// submitted: a record is only ever written for a parsed spec, so anything
// else was put there by hand, and is not trusted to name files.
func checkRecordNames(rec *record) error {
	if err := validID(rec.ID); err != nil {
		return err
	}
	if err := spec.ValidName(rec.Name); err != nil {
		return fmt.Errorf("job name: %w", err)
	}
	return nil
}
