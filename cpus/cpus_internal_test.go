package cpus

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestAvailableFrom(t *testing.T) {
	f := func(dir string, gomaxprocs, want int) {
		t.Helper()
		got := availableFrom(filepath.Join("testdata", dir), gomaxprocs)
		if got != want {
			t.Errorf("availableFrom(%q, GOMAXPROCS=%d) = %d, want %d", dir, gomaxprocs, got, want)
		}
	}

	// cgroup v2.
	f("v2", 8, 2)           // CPUQuota=150% on the service: 1.5 rounds up to 2
	f("v2", 1, 1)           // GOMAXPROCS below the quota wins
	f("v2-nolimit", 8, 8)   // "max 100000" all the way up
	f("v2-parent", 8, 1)    // limit on the parent slice, none on the service
	f("v2-container", 8, 2) // cgroup namespace: path "/" at the mount point
	f("v2-half", 8, 1)      // 0.5 CPU: never less than 1
	f("v2-escaped", 8, 4)   // mount point with a space (\040 in mountinfo)

	// cgroup v1.
	f("v1", 8, 3)           // --cpus=3 on the container's cgroup
	f("v1-mountroot", 8, 3) // 2.5 CPUs, container cgroup mounted as the root
	f("v1-nolimit", 8, 8)   // cfs_quota_us -1
	f("hybrid", 8, 2)       // cpu on v1, an empty unified v2 beside it

	// Missing or malformed: GOMAXPROCS, never a panic.
	f("bad-cpumax", 8, 8)
	f("bad-period", 8, 8)
	f("bad-v1", 8, 8)
	f("bad-mountinfo", 8, 8)
	f("bad-cgroup", 8, 8)
	f("no-cpumax", 8, 8)
	f("does-not-exist", 8, 8)
	f("does-not-exist", 0, 1) // never less than 1
}

func TestQuotaFrom(t *testing.T) {
	f := func(dir string, want float64, wantOK bool) {
		t.Helper()
		q, ok := quotaFrom(filepath.Join("testdata", dir))
		if ok != wantOK || (ok && q.cpus() != want) {
			t.Errorf("quotaFrom(%q) = %v CPUs, %v; want %v, %v", dir, q.cpus(), ok, want, wantOK)
		}
	}
	f("v2", 1.5, true)
	f("v2-parent", 1, true)
	f("v2-half", 0.5, true)
	f("v1", 3, true)
	f("v1-mountroot", 2.5, true)
	f("hybrid", 1.5, true)
	f("v2-nolimit", 0, false)
	f("v1-nolimit", 0, false)
	f("bad-cpumax", 0, false)
	f("does-not-exist", 0, false)
}

func TestParseCPUMax(t *testing.T) {
	f := func(in string, want quota, wantOK bool) {
		t.Helper()
		got, ok := parseCPUMax([]byte(in))
		if got != want || ok != wantOK {
			t.Errorf("parseCPUMax(%q) = %v, %v; want %v, %v", in, got, ok, want, wantOK)
		}
	}
	f("max 100000\n", quota{}, false)
	f("150000 100000\n", quota{150000, 100000}, true)
	f("150000 100000", quota{150000, 100000}, true)
	f("max\n", quota{}, false)
	f("150000\n", quota{}, false)
	f("0 100000\n", quota{}, false)
	f("-5 100000\n", quota{}, false)
	f("150000 0\n", quota{}, false)
	f("150000 100000 7\n", quota{}, false)
	f("", quota{}, false)
	f("99999999999999999999 100000", quota{}, false)
}

func TestCeil(t *testing.T) {
	f := func(q quota, want int) {
		t.Helper()
		if got := q.ceil(); got != want {
			t.Errorf("%v.ceil() = %d, want %d", q, got, want)
		}
	}
	f(quota{100000, 100000}, 1)
	f(quota{100001, 100000}, 2)
	f(quota{150000, 100000}, 2)
	f(quota{1, 100000}, 1)
	f(quota{400000, 100000}, 4)
	f(quota{50000, 50000}, 1)
}

func TestUnescape(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
	f(`/sys/fs/cgroup`, "/sys/fs/cgroup")
	f(`/a\040b`, "/a b")
	f(`/a\011b\012c\134d`, "/a\tb\nc\\d")
	f(`/a\04`, `/a\04`) // truncated escape is kept as is
	f(`/a\999`, `/a\999`)
	f(`\`, `\`)
}

func TestRelPath(t *testing.T) {
	f := func(path, prefix, want string, wantOK bool) {
		t.Helper()
		got, ok := relPath(path, prefix)
		if got != want || ok != wantOK {
			t.Errorf("relPath(%q, %q) = %q, %v; want %q, %v", path, prefix, got, ok, want, wantOK)
		}
	}
	f("/a/b", "/", "/a/b", true)
	f("/a/b", "/a", "/b", true)
	f("/a/b", "/a/b", "/", true)
	f("/ab", "/a", "", false)
	f("/a", "/a/b", "", false)
}

// TestThisHost only checks that the real files parse without surprises:
// the answer depends on the machine.
func TestThisHost(t *testing.T) {
	n := Available()
	if n < 1 || n > runtime.GOMAXPROCS(0) {
		t.Fatalf("Available() = %d, want 1..GOMAXPROCS (%d)", n, runtime.GOMAXPROCS(0))
	}
	q, ok := Quota()
	if ok && q <= 0 {
		t.Fatalf("Quota() = %v, true; want a positive quota", q)
	}
	t.Logf("Available() = %d, Quota() = %v, %v, GOMAXPROCS = %d", n, q, ok, runtime.GOMAXPROCS(0))
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000\n", "150000 100000\n", "lots 100000", "100000 0", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := parseCPUMax(b)
		if ok && (q.us <= 0 || q.periodUS <= 0 || q.ceil() < 1) {
			t.Fatalf("parseCPUMax(%q) = %+v, true: want positive fields", b, q)
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	for _, dir := range []string{"v1", "v2", "hybrid", "v2-escaped", "bad-mountinfo"} {
		b, err := os.ReadFile(filepath.Join("testdata", dir, "proc/self/mountinfo"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range parseMountinfo(b) {
			_, _, _ = cgroupDir([]mount{m}, "/a/b", m.fstype, "")
		}
		_ = parseCgroups(b)
	})
}
