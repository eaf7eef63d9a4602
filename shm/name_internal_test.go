package shm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInstallRace: the name changes between Create's check (claimName) and
// its rename. A file, link or ring that appeared meanwhile is examined
// again, never replaced blindly and never written through.
func TestInstallRace(t *testing.T) {
	secret := []byte("root:x:0:0:root:/root:/bin/bash\n")
	cases := []struct {
		name  string
		stale bool // a stale ring was there at the check
		// change changes path after the check; it returns a file whose
		// bytes must stay as they are ("" if none).
		change func(t *testing.T, cfg Config, path string) string
		want   error
	}{
		{name: "symlink planted at a free name", want: ErrUntrusted, change: func(t *testing.T, cfg Config, path string) string {
			target := filepath.Join(t.TempDir(), "passwd")
			mustWrite(t, target, secret)
			mustDo(t, os.Symlink(target, path))
			return target
		}},
		{name: "stale ring swapped for a symlink", stale: true, want: ErrUntrusted, change: func(t *testing.T, cfg Config, path string) string {
			target := filepath.Join(t.TempDir(), "passwd")
			mustWrite(t, target, secret)
			mustDo(t, os.Symlink(target, path+".new"))
			mustDo(t, os.Rename(path+".new", path))
			return target
		}},
		{name: "live ring created at a free name", want: ErrInUse, change: func(t *testing.T, cfg Config, path string) string {
			p, err := Create(cfg)
			mustDo(t, err)
			t.Cleanup(func() { p.Close() })
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Dir: t.TempDir(), Name: "r", SlotSize: 8192,
				Fields: []Field{{Name: "x", Kind: Dense, DType: Float32}}}
			path := filepath.Join(cfg.Dir, cfg.Name)
			if tc.stale {
				p, err := Create(cfg)
				mustDo(t, err)
				p.Close()
			}
			cfg, schema, g, err := prepareCreate(cfg)
			mustDo(t, err)
			old, err := claimName(path, 0)
			mustDo(t, err)
			if (old != nil) != tc.stale {
				t.Fatalf("claimName found a stale ring: %v, want %v", old != nil, tc.stale)
			}
			b, err := buildTemp(cfg, schema, g)
			mustDo(t, err)
			defer b.discard()

			target := tc.change(t, cfg, path)
			var before []byte
			if target != "" {
				before = readAll(t, target)
			}
			lstat := func() os.FileInfo {
				fi, err := os.Lstat(path)
				mustDo(t, err)
				return fi
			}
			was := lstat()
			old, err = installRing(b.tmp, path, old, 0)
			old.release()
			if !errors.Is(err, tc.want) {
				t.Fatalf("install: %v, want %v", err, tc.want)
			}
			if !os.SameFile(was, lstat()) {
				t.Errorf("%s was replaced", path)
			}
			if _, err := os.Lstat(b.tmp); err != nil {
				t.Errorf("the temporary file is gone: %v", err)
			}
			if target != "" && !bytes.Equal(readAll(t, target), before) {
				t.Errorf("%s changed through %s", target, path)
			}
		})
	}
}

// TestTempPID: only this package's temporary names are recognized.
func TestTempPID(t *testing.T) {
	for rest, want := range map[string]int{
		"123":                     123,
		"123-00000000deadbeef":    123,
		"123-deadbeef":            0,
		"123-0000000000deadbeefx": 0,
		"0123":                    0,
		"-1":                      0,
		"x":                       0,
		"1.tmp-2":                 0,
	} {
		got, ok := tempPID(rest)
		if ok != (want != 0) || got != want {
			t.Errorf("tempPID(%q) = %d, %v; want %d", rest, got, ok, want)
		}
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	mustDo(t, os.WriteFile(path, b, 0o644))
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	mustDo(t, err)
	return b
}

// TestTrustedOwners: errors list exactly the uids that are trusted.
func TestTrustedOwners(t *testing.T) {
	self := uint32(os.Geteuid())
	for _, owner := range []uint32{0, self, 1001} {
		got := trustedOwners(owner)
		for _, uid := range []uint32{0, self, owner, 1002} {
			named := uid == 0 && strings.HasSuffix(got, "root") ||
				strings.Contains(got, "uid "+strconv.FormatUint(uint64(uid), 10)+" ")
			if named != trustedUID(uid, owner) {
				t.Errorf("trustedOwners(%d) = %q; uid %d trusted: %v", owner, got, uid, trustedUID(uid, owner))
			}
		}
	}
}
