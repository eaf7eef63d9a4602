package peer

import (
	"errors"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestComputeIdentity: the identity names the architecture and its
// level, the Go release, the build tags and the source: the commit of a
// clean tree, else a release version, else the executable's hash, else
// "unknown".
func TestComputeIdentity(t *testing.T) {
	exe := func() (string, error) { return "feed", nil }
	noExe := func() (string, error) { return "", errors.New("no /proc") }
	build := func(version string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/lastmile/lastmile", Version: version}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	f := func(what string, bi *debug.BuildInfo, arch string, exe func() (string, error), want string) {
		t.Helper()
		if got := computeIdentity(bi, arch, "go1.26.8", "", exe); got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	f("a clean checkout", build("v0.0.0-2026-abc", "GOAMD64", "v1", "vcs.revision", "abc", "vcs.modified", "false"), "amd64", exe,
		"amd64/v1 go1.26.8 rev abc")
	f("the same at GOAMD64=v3 (fuses x*y+z)", build("v0.0.0-2026-abc", "GOAMD64", "v3", "vcs.revision", "abc"), "amd64", exe,
		"amd64/v3 go1.26.8 rev abc")
	f("arm64", build("", "GOARM64", "v8.0", "vcs.revision", "abc"), "arm64", exe, "arm64/v8.0 go1.26.8 rev abc")
	f("build tags", build("", "-tags", "nocuda", "vcs.revision", "abc"), "amd64", exe, "amd64 go1.26.8 tags nocuda rev abc")
	f("a modified tree", build("v0.0.0-2026-abc+dirty", "vcs.revision", "abc", "vcs.modified", "true"), "amd64", exe,
		"amd64 go1.26.8 exe sha256:feed")
	f("go install of a release", build("v1.2.3"), "amd64", exe, "amd64 go1.26.8 version v1.2.3")
	f("go test, no VCS information", build("(devel)"), "amd64", exe, "amd64 go1.26.8 exe sha256:feed")
	f("no build information", nil, "amd64", exe, "amd64 go1.26.8 exe sha256:feed")
	f("nothing readable", build("(devel)"), "amd64", noExe, "amd64 go1.26.8 unknown")
	if id := Compute(); !strings.Contains(id, "exe sha256:") || Compute() != id {
		t.Errorf("a test binary's identity: %q, then %q", id, Compute())
	}
}

// TestAnotherBuildExcludedNotQuarantined: a peer of another compute
// identity refuses every unit (FailedPrecondition, counted), naming both
// identities and what to do; the requester runs them itself, excludes
// the peer for versionBackoff with that reason in its status, and never
// quarantines it, even verifying every unit.
func TestAnotherBuildExcludedNotQuarantined(t *testing.T) {
	f := newFixture(t)
	want := f.run(f.job("local"), nil)
	const other = "arm64 go1.26.8 rev 0ther"
	s, addr := f.server(func(s *Server) { s.identity = other })
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("spill")
	sp := f.spiller(p, job, SpillerConfig{Verify: 1})
	same(t, "a peer of another build", f.run(job, sp), want)
	if n := s.Stats().RefusedBuild.Load(); n == 0 || s.Stats().Units.Load() != 0 {
		t.Fatalf("the peer of another build refused %d units and served %d", n, s.Stats().Units.Load())
	}
	st := p.Stats()[0]
	if st.Healthy || st.Quarantined != "" || st.Mismatches != 0 || sp.Stats().Mismatches.Load() != 0 {
		t.Errorf("a peer of another build: %+v", st)
	}
	for _, s := range []string{other, Compute(), "run the same lastmile build on the GPU hosts and their peers"} {
		if !strings.Contains(st.LastError, s) {
			t.Errorf("its status says %q, not %q", st.LastError, s)
		}
	}
	p.mu.Lock()
	backoff := p.peers[addr].backoff
	p.mu.Unlock()
	if backoff != versionBackoff {
		t.Errorf("excluded for %v, want %v", backoff, versionBackoff)
	}
}

// TestProbeRefusesAnotherBuild: a peer that answers the probe as another
// build stays excluded, for versionBackoff, and its status shows its
// identity.
func TestProbeRefusesAnotherBuild(t *testing.T) {
	const other = "arm64 go1.26.8 rev 0ther"
	addr, stop := serveInfoOf(t, "127.0.0.1:0", Version, other)
	defer stop()
	p, r := failedPeer(t, addr)
	p.mu.Lock()
	r.excluded = time.Now()
	p.mu.Unlock()
	p.pick("")
	eventually(t, "the probe", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !r.probing && r.backoff == versionBackoff
	})
	if st := p.Stats()[0]; st.Healthy || !strings.Contains(st.LastError, "another lastmile build") || st.Compute != other {
		t.Fatalf("a peer of another build: %+v", st)
	}
}

// TestInfoMismatch: a peer's Info says whether this host may give it
// units, and if not, why and what to do.
func TestInfoMismatch(t *testing.T) {
	f := func(in Info, want string) {
		t.Helper()
		err := in.Mismatch("10.0.0.2:7941")
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", in, err, want)
		}
	}
	f(Info{Version: Version, Compute: Compute(), Workers: 1}, "")
	f(Info{Version: Version - 1, Workers: 1}, "protocol version 4, this host 5")
	f(Info{Version: Version, Compute: "arm64 go1.26.8 rev 0ther", Workers: 1}, "run the same lastmile build on the GPU hosts and their peers")
}

// TestMakeBuildOneIdentity: bin/lastmile and bin/lastmiled are different
// executables, so without a commit of a clean tree (-buildvcs=false, a
// modified tree) each would be known by its own file's hash, and every
// peer would refuse lastmile run's units. make build stamps both, in one
// go build, with the working tree's git tree hash; the stamp decides the
// identity whatever the executables' hashes. Read from make -n, so that
// the test costs no link of the two binaries.
func TestMakeBuildOneIdentity(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	if err := exec.Command("git", "-C", "..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout: make build stamps no source (docs/peers.md)")
	}
	out, err := exec.Command("make", "-s", "-n", "--no-print-directory", "-C", "..", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	cmd := strings.TrimSpace(string(out))
	_, v, ok := strings.Cut(cmd, "peer.buildSource=")
	stamp, _, _ := strings.Cut(v, "'")
	stamp, _, _ = strings.Cut(stamp, " ")
	if !ok || len(stamp) != 40 || strings.Trim(stamp, "0123456789abcdef") != "" {
		t.Fatalf("make build stamps no git tree hash as peer.buildSource: %s", cmd)
	}
	if strings.Count(cmd, "go build") != 1 || !strings.HasSuffix(cmd, "./cmd/...") {
		t.Fatalf("make build does not build every command in one go build with one stamp: %s", cmd)
	}
	bi := &debug.BuildInfo{GoVersion: runtime.Version(), Main: debug.Module{Path: "github.com/lastmile/lastmile", Version: "(devel)"}}
	a := computeIdentity(bi, runtime.GOARCH, bi.GoVersion, stamp, func() (string, error) { return "one-executable", nil })
	b := computeIdentity(bi, runtime.GOARCH, bi.GoVersion, stamp, func() (string, error) { return "another-executable", nil })
	if a != b {
		t.Errorf("one stamp, two executables: identities %q and %q; every peer would refuse lastmile run's units", a, b)
	}
}

// TestHugeComputeClipped: a peer answering with a huge compute identity
// (in its Info and its refusals) has it clipped in the requester's
// status, not held and shown whole.
func TestHugeComputeClipped(t *testing.T) {
	f := newFixture(t)
	huge := strings.Repeat("z", 512<<10)
	_, addr := f.server(func(s *Server) { s.identity = huge })
	p := f.pool(f.ca.issue("gpu-host"), addr)
	job := f.job("spill")
	sp := f.spiller(p, job, SpillerConfig{})
	f.run(job, sp)
	p.mu.Lock()
	r := p.peers[addr]
	p.probeLocked(r, time.Now().Add(time.Hour))
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := p.Stats()[0]
		if st.Compute != "" || time.Now().After(deadline) {
			if len(st.LastError) > 2*maxCompute+1024 || len(st.Compute) > maxCompute+3 || st.LastError == "" {
				t.Errorf("a peer of a %d-byte identity: its last error of %d bytes, compute of %d", len(huge), len(st.LastError), len(st.Compute))
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
