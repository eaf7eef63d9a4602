package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
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
	Groups    []uint32  `json:"groups,omitempty"`
	Spec      string    `json:"spec"`
	BaseDir   string    `json:"base_dir,omitempty"`
	File      string    `json:"file,omitempty"`
	WorldSize int       `json:"world_size_override,omitempty"`
	Weight    int       `json:"weight"`
	Hash      string    `json:"spec_hash"`
	State     string    `json:"state"`
	Error     string    `json:"error,omitempty"`
	Created   time.Time `json:"created"`
	Started   time.Time `json:"started,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	Restarts  int       `json:"restarts"`
	Ranks     []rankRec `json:"ranks"`
	// Resume is the resume cursors the latest production run started
	// with: the start of any ring it created before its generation was
	// recorded (a crash in between).
	Resume []engine.Cursor `json:"resume,omitempty"`
	// RingsRemoved: the job's rings were removed (it ended and drained,
	// or its grace period ran out).
	RingsRemoved bool `json:"rings_removed,omitempty"`
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
}

const recordVersion = 1

// store persists records atomically: write a temporary file, fsync it,
// rename it over the record, fsync the directory. A crash at any point
// leaves either the old record or the new one, never a torn one.
type store struct {
	dir string // STATE_DIR/jobs
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
	return &store{dir: dir}, nil
}

// path returns the record file of a job id. It never builds a path from
// anything but a valid id: ids are 12 hex digits (newID).
func (s *store) path(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", fmt.Errorf("state store: %w", err)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// put writes rec atomically.
func (s *store) put(rec *record) error {
	path, err := s.path(rec.ID)
	if err != nil {
		return fmt.Errorf("persist job: %w", err)
	}
	rec.Version = recordVersion
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("persist job %s: %w", rec.ID, err)
	}
	data = append(data, '\n')
	tmp := filepath.Join(s.dir, "."+rec.ID+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("persist job %s: %w", rec.ID, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("persist job %s: %w", rec.ID, err)
	}
	return syncDir(s.dir)
}

// remove forgets a job.
func (s *store) remove(id string) error {
	path, err := s.path(id)
	if err != nil {
		return fmt.Errorf("forget job: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("forget job %s: %w", id, err)
	}
	return syncDir(s.dir)
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
