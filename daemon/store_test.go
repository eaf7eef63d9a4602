package daemon

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStoreWithoutFreeDescriptors fills every descriptor the process may
// open and checks that job records are still written, twice in a row
// (the reserve is taken back after each write), and that with the reserve
// gone too the write fails with an error naming the file rather than
// tearing the record.
func TestStoreWithoutFreeDescriptors(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rec := &record{ID: "abc123def456", Name: "j", Spec: "name: j\n", State: "running"}
	if err := s.put(rec); err != nil {
		t.Fatal(err)
	}
	fill := exhaustFDs(t)
	for _, state := range []string{"done", "failed"} {
		rec.State = state
		if err := s.put(rec); err != nil {
			fill.release()
			t.Fatalf("put with no free descriptor (state %s): %v", state, err)
		}
	}
	// Take the reserve away as well: the write fails cleanly.
	s.mu.Lock()
	unix.Close(s.reserve)
	s.reserve = -1
	s.mu.Unlock()
	fill.grab() // the slot the reserve held
	rec.State = "canceled"
	err = s.put(rec)
	fill.release()
	if err == nil || !strings.Contains(err.Error(), ".abc123def456.tmp") || !strings.Contains(err.Error(), "too many open files") {
		t.Errorf("put with no descriptor and no reserve: %v, want an error naming the file and EMFILE", err)
	}
	recs, errs := s.load()
	if len(errs) != 0 || len(recs) != 1 || recs[0].State != "failed" {
		t.Fatalf("after the writes: %+v %v, want the record of the last successful write", recs, errs)
	}
	rec.State = "done"
	if err := s.put(rec); err != nil || s.reserve < 0 {
		t.Errorf("put once descriptors are free again: %v (reserve %d)", err, s.reserve)
	}
}

// fdFill holds every free descriptor under a lowered soft limit.
type fdFill struct {
	t     *testing.T
	fds   []int
	saved unix.Rlimit
}

func exhaustFDs(t *testing.T) *fdFill {
	f := &fdFill{t: t}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &f.saved); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	low := f.saved
	low.Cur = uint64(len(ents) + 64)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	f.grab()
	return f
}

// grab opens /dev/null until the process is out of descriptors.
func (f *fdFill) grab() {
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EMFILE {
			return
		}
		if err != nil {
			f.release()
			f.t.Fatal(err)
		}
		f.fds = append(f.fds, fd)
	}
}

func (f *fdFill) release() {
	for _, fd := range f.fds {
		unix.Close(fd)
	}
	f.fds = nil
	unix.Setrlimit(unix.RLIMIT_NOFILE, &f.saved)
}

// TestStoreWriteFails: a write of the state store that the kernel refuses
// (a full disk, a quota: here the file size limit, EFBIG) fails the put
// with an error naming the file and leaves the last record, instead of
// panicking on the -1 count unix.Write returns with the error (which took
// down a submission with a 500, and would take down the daemon from a
// production goroutine).
func TestStoreWriteFails(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rec := &record{ID: "abc123def456", Name: "j", Spec: "name: j\n", State: "running"}
	if err := s.put(rec); err != nil {
		t.Fatal(err)
	}
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &saved); err != nil {
		t.Fatal(err)
	}
	lim := saved
	lim.Cur = 64 // a record is larger: its first write is cut short, its second refused
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip("cannot lower RLIMIT_FSIZE:", err)
	}
	rec.State = "done"
	func() {
		defer unix.Setrlimit(unix.RLIMIT_FSIZE, &saved)
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("put on a refused write panicked: %v", p)
			}
		}()
		err = s.put(rec)
	}()
	if err == nil || !strings.Contains(err.Error(), ".abc123def456.tmp") {
		t.Fatalf("put on a refused write: %v, want an error naming the file", err)
	}
	recs, errs := s.load()
	if len(errs) != 0 || len(recs) != 1 || recs[0].State != "running" {
		t.Fatalf("after the refused write: %+v %v, want the last record written", recs, errs)
	}
}
