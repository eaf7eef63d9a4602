package shm_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// Files planted under a ring's name in a shared directory are never
// followed, written through, reused, adopted or replaced (trust.go).

const nobody = 65534

// secret is the content of a file a planted link points at, standing for
// /etc/passwd.
var secret = []byte("root:x:0:0:root:/root:/bin/bash\n")

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to uid 65534 (run the tests as root to cover it)")
	}
}

// staleRunningRing leaves a ring at cfg's name whose producer is gone while
// its stream still runs: one Adopt would continue. It returns its
// generation.
func staleRunningRing(t *testing.T, cfg shm.Config) uint64 {
	t.Helper()
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gen := p.Generation()
	if _, err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	p.Close()
	shm.Unclaim(cfg.Dir, cfg.Name)
	return gen
}

// fileID is what a name refers to, not followed.
func fileID(t *testing.T, path string) (uint64, uint64, os.FileMode) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(path)
	return st.Dev, st.Ino, fi.Mode().Type()
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plantCase is something planted at a ring's name.
type plantCase struct {
	name string
	root bool
	// plant puts something at dir/ring and returns the file whose bytes
	// must not change ("" if none).
	plant func(t *testing.T, cfg shm.Config) string
	want  string // in every error
}

func plantCases() []plantCase {
	return []plantCase{
		{name: "symlink to a foreign file", want: "symbolic link", plant: func(t *testing.T, cfg shm.Config) string {
			target := filepath.Join(t.TempDir(), "passwd")
			if err := os.WriteFile(target, secret, 0o644); err != nil {
				t.Fatal(err)
			}
			return target
		}},
		{name: "symlink to a stale ring elsewhere", want: "symbolic link", plant: func(t *testing.T, cfg shm.Config) string {
			other := cfg
			other.Dir = t.TempDir()
			staleRunningRing(t, other)
			return filepath.Join(other.Dir, other.Name)
		}},
		{name: "hard link to a foreign file", want: "2 hard links", plant: func(t *testing.T, cfg shm.Config) string {
			other := filepath.Join(cfg.Dir, "other")
			if err := os.WriteFile(other, secret, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(other, filepath.Join(cfg.Dir, cfg.Name)); err != nil {
				t.Fatal(err)
			}
			return other
		}},
		{name: "hard link to a stale ring", want: "2 hard links", plant: func(t *testing.T, cfg shm.Config) string {
			other := cfg
			other.Name = "other"
			staleRunningRing(t, other)
			if err := os.Link(filepath.Join(cfg.Dir, "other"), filepath.Join(cfg.Dir, cfg.Name)); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(cfg.Dir, "other")
		}},
		{name: "FIFO", want: "FIFO", plant: func(t *testing.T, cfg shm.Config) string {
			if err := syscall.Mkfifo(filepath.Join(cfg.Dir, cfg.Name), 0o666); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
		{name: "ring owned by another user", root: true, want: "owned by uid 65534", plant: func(t *testing.T, cfg shm.Config) string {
			staleRunningRing(t, cfg)
			path := filepath.Join(cfg.Dir, cfg.Name)
			if err := os.Chown(path, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return path
		}},
	}
}

// TestPlantedAtRingName: whatever is planted at the ring's name, every
// entry point refuses it with ErrUntrusted, naming the file, and leaves
// both the name and what it points at exactly as they were.
func TestPlantedAtRingName(t *testing.T) {
	for _, tc := range plantCases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			cfg := testConfig(t, "r", 4)
			path := filepath.Join(cfg.Dir, cfg.Name)
			target := tc.plant(t, cfg)
			if strings.HasPrefix(tc.name, "symlink") {
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			}
			var before []byte
			if target != "" {
				before = readBytes(t, target)
			}
			dev, ino, typ := fileID(t, path)

			refuseAll(t, cfg, tc.want)
			if d, i, ty := fileID(t, path); d != dev || i != ino || ty != typ {
				t.Errorf("%s was replaced (type %v, now %v)", path, typ, ty)
			}
			if target != "" && !bytes.Equal(readBytes(t, target), before) {
				t.Errorf("%s changed through the planted name", target)
			}
		})
	}
}

// refuseAll checks that every entry point refuses the ring cfg names.
func refuseAll(t *testing.T, cfg shm.Config, want string) {
	t.Helper()
	path := filepath.Join(cfg.Dir, cfg.Name)
	checkRefused(t, path, want, "create", func() error {
		p, err := shm.Create(cfg)
		if err == nil {
			p.Close()
		}
		return err
	})
	checkRefused(t, path, want, "take", func() error {
		p, err := shm.Take(cfg)
		if err == nil {
			p.Close()
		}
		return err
	})
	checkRefused(t, path, want, "adopt", func() error {
		p, err := shm.Adopt(cfg)
		if err == nil {
			p.Close()
		}
		return err
	})
	checkRefused(t, path, want, "claim", func() error {
		_, err := shm.Claim(cfg.Dir, cfg.Name, 1000)
		shm.Unclaim(cfg.Dir, cfg.Name)
		return err
	})
	checkRefused(t, path, want, "open", func() error {
		c, err := shm.Open(cfg.Dir, cfg.Name)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func checkRefused(t *testing.T, path, want, what string, f func() error) {
	t.Helper()
	err := f()
	if !errors.Is(err, shm.ErrUntrusted) {
		t.Errorf("%s: %v, want ErrUntrusted", what, err)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, want) || !strings.Contains(msg, "remove") {
		t.Errorf("%s: %q does not name %s, say %q and what to do", what, msg, path, want)
	}
}

// TestAdoptOwner: a daemon adopts a ring owned by its job's owner, and
// refuses one owned by anyone else, with an error naming the file, its
// owner and what to do.
func TestAdoptOwner(t *testing.T) {
	needRoot(t)
	cfg := testConfig(t, "owned", 4)
	gen := staleRunningRing(t, cfg)
	path := filepath.Join(cfg.Dir, cfg.Name)
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		owner uint32
		ok    bool
	}{
		{"no owner expected", 0, false},
		{"another owner expected", 1000, false},
		{"the file's owner expected", nobody, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := shm.Claim(cfg.Dir, cfg.Name, tc.owner)
			shm.Unclaim(cfg.Dir, cfg.Name)
			if tc.ok != (err == nil) || (err == nil && info.Generation != gen) {
				t.Fatalf("claim expecting uid %d: %+v, %v", tc.owner, info, err)
			}
			if err != nil && (!errors.Is(err, shm.ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") ||
				!strings.Contains(err.Error(), path)) {
				t.Fatalf("claim expecting uid %d: %v, want ErrUntrusted naming %s and uid 65534", tc.owner, err, path)
			}
			c, err := shm.OpenWith(cfg.Dir, cfg.Name, shm.OpenOptions{Owner: tc.owner})
			if tc.ok != (err == nil) {
				t.Fatalf("open expecting uid %d: %v", tc.owner, err)
			}
			if err == nil {
				c.Close()
			}
		})
	}
	own := cfg
	own.Owner = nobody
	p, err := shm.Adopt(own)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Generation() != gen {
		t.Errorf("adopt expecting uid %d made a new ring (generation %d, want %d)", nobody, p.Generation(), gen)
	}
}

// TestCreateReplacesTrustedStale: a stale ring owned by the expected owner
// is replaced by a new one (new generation, new file).
func TestCreateReplacesTrustedStale(t *testing.T) {
	needRoot(t)
	cfg := testConfig(t, "stale", 4)
	gen := staleRunningRing(t, cfg)
	path := filepath.Join(cfg.Dir, cfg.Name)
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	_, oldIno, _ := fileID(t, path)
	cfg.Owner = nobody
	p, err := shm.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, ino, _ := fileID(t, path); p.Generation() == gen || ino == oldIno {
		t.Errorf("the stale ring was not replaced (generation %d, inode %d)", p.Generation(), ino)
	}
}

// TestPlantedTemps: files at a ring's temporary names are never followed
// and never block Create; only this user's stale regular temporary files
// are removed.
func TestPlantedTemps(t *testing.T) {
	dead := "2147483646"
	self := strconv.Itoa(os.Getpid())
	cases := []struct {
		name    string
		root    bool
		temp    string // the name after ".r.tmp-"
		plant   func(t *testing.T, path, target string)
		removed bool
	}{
		{name: "symlink, dead pid", temp: dead, plant: symlinkTo},
		{name: "symlink, our pid", temp: self, plant: symlinkTo},
		{name: "symlink, dead pid and random", temp: dead + "-00000000deadbeef", plant: symlinkTo},
		{name: "hard link, dead pid", temp: dead, plant: func(t *testing.T, path, target string) {
			if err := os.Link(target, path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "regular, our pid", temp: self, plant: writeSecret},
		{name: "foreign, dead pid", root: true, temp: dead, plant: func(t *testing.T, path, target string) {
			writeSecret(t, path, target)
			if err := os.Chown(path, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "ours, dead pid", temp: dead, plant: writeSecret, removed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			cfg := testConfig(t, "r", 4)
			target := filepath.Join(cfg.Dir, "passwd")
			if err := os.WriteFile(target, secret, 0o644); err != nil {
				t.Fatal(err)
			}
			temp := filepath.Join(cfg.Dir, ".r.tmp-"+tc.temp)
			tc.plant(t, temp, target)
			p, err := shm.Create(cfg)
			if err != nil {
				t.Fatalf("create beside %s: %v", temp, err)
			}
			p.Close()
			_, err = os.Lstat(temp)
			if gone := errors.Is(err, os.ErrNotExist); gone != tc.removed {
				t.Errorf("%s: removed %v, want %v (%v)", temp, gone, tc.removed, err)
			}
			if !bytes.Equal(readBytes(t, target), secret) {
				t.Errorf("%s changed through %s", target, temp)
			}
		})
	}
}

func symlinkTo(t *testing.T, path, target string) {
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func writeSecret(t *testing.T, path, _ string) {
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		t.Fatal(err)
	}
}
