package peer

// Compute identity: which builds compute the same bytes.
//
// A spilled unit must come back byte for byte as this host would have
// computed it. Two hosts compute the same bytes only when they run the
// same code compiled the same way for the same architecture: arm64 fuses
// x*y+z into one rounding and makes other NaN bits than amd64, amd64 at
// GOAMD64=v3 fuses too, another Go release may compile an op otherwise,
// and another lastmile build may compute an op otherwise (a fix changed
// its output). So a requester's tickets carry its compute identity
// (Ticket.Compute), a peer refuses a ticket of another identity
// (codes.FailedPrecondition, counted as RefusedBuild), and the requester
// excludes it as it does a peer of another protocol version. An honest
// peer of another build is so never given units, and never quarantined
// as a liar by verification.
//
// The identity is made of:
//   - GOARCH and its level (GOAMD64, GOARM64, ...: what instructions the
//     compiler may use, FMA among them);
//   - runtime.Version(), the compiler and runtime that built it;
//   - the build tags (-tags), which select code;
//   - the source: the tree `make build` stamps (buildSource) when it
//     does; otherwise the commit it was built from (vcs.revision) when the
//     tree was clean; otherwise the main module's version when it is a
//     release (`go install ...@v1.2.3` stamps no VCS information);
//     otherwise, for a build from a modified tree, one without VCS
//     information (-buildvcs=false, a tarball) and `go test` binaries,
//     the SHA-256 of the running executable: such builds are the same
//     only when they are the same file. Only when even that cannot be
//     read is it "unknown", which matches only another "unknown".
//
// Not in it: GOOS (the ops compute nothing the kernel decides), -ldflags
// (it stamps versions and strips symbols, not code) and the main
// module's version when the commit is known (derived from the commit).
// The identity is conservative: two builds it tells apart may compute
// the same bytes (the same source built by `go build` and by `go
// install`), and then the operator deploys one of them everywhere; two
// builds it calls the same compute the same bytes.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Compute is this process's compute identity (computed once; for a
// build without VCS information that hashes the executable).
var Compute = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return computeIdentity(bi, runtime.GOARCH, runtime.Version(), buildSource, executableHash)
})

// buildSource names the source tree a build was made from, when the
// build stamps it: `make build` sets it (-X) to the git tree hash of the
// working tree, untracked files included, so that bin/lastmile and
// bin/lastmiled of one build, two different executables, have one
// identity even from a modified tree or with -buildvcs=false (where
// each would otherwise be known by its own executable's hash, and every
// peer would refuse `lastmile run`'s units).
var buildSource string

// computeIdentity is the compute identity of a build of arch and go
// whose build information is bi (nil: none) and source stamp stamp
// ("": none), exe hashing its executable.
func computeIdentity(bi *debug.BuildInfo, arch, goVersion, stamp string, exe func() (string, error)) string {
	settings := map[string]string{}
	if bi != nil {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	id := arch
	for _, k := range []string{"GOAMD64", "GOARM64", "GOARM", "GO386", "GOPPC64", "GORISCV64", "GOMIPS", "GOMIPS64", "GOWASM"} {
		if v := settings[k]; v != "" {
			id += "/" + v
		}
	}
	id += " " + goVersion
	if tags := settings["-tags"]; tags != "" {
		id += " tags " + tags
	}
	if stamp != "" {
		return id + " source " + stamp
	}
	return id + " " + source(bi, settings, exe)
}

// source names the source and build of bi (computeIdentity).
func source(bi *debug.BuildInfo, settings map[string]string, exe func() (string, error)) string {
	if rev := settings["vcs.revision"]; rev != "" && settings["vcs.modified"] != "true" {
		return "rev " + rev
	}
	if bi != nil && isRelease(bi.Main.Version) && settings["vcs.modified"] != "true" {
		return "version " + bi.Main.Version
	}
	sum, err := exe()
	if err != nil {
		return "unknown"
	}
	return "exe sha256:" + sum
}

// isRelease reports whether v is a module version that names one source
// tree: not a development build's "(devel)", nor one of a modified tree.
func isRelease(v string) bool {
	return v != "" && v != "(devel)" && !strings.Contains(v, "+dirty")
}

// executableHash is the SHA-256 of the running executable, read through
// /proc/self/exe, which is the file this process runs even after an
// upgrade replaced it on disk.
func executableHash() (string, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		name, err2 := os.Executable()
		if err2 != nil {
			return "", err
		}
		if f, err = os.Open(name); err != nil {
			return "", err
		}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// anotherBuild is the error of a peer of compute identity peer given a
// ticket of a requester of identity requester, which says what to do.
func anotherBuild(requester, peer string) error {
	return fmt.Errorf("%w: the requester is %q, this peer %q: their outputs may differ in bits, "+
		"so the peer computes none of its units; run the same lastmile build on the GPU hosts and their peers",
		errBuild, clipCompute(requester), clipCompute(peer))
}

// clipCompute is a compute identity from the other side, clipped to
// maxCompute bytes: it is quoted in logs, errors and status, and another
// side may send one of any length.
func clipCompute(id string) string {
	if len(id) > maxCompute {
		return id[:maxCompute] + "..."
	}
	return id
}

var errBuild = errors.New("another lastmile build")

// Mismatch says why this host gives the peer at addr, which answered
// in, no unit: it speaks another protocol version, or is of another
// compute identity; nil if neither.
func (in Info) Mismatch(addr string) error {
	if in.Version != Version {
		return fmt.Errorf("peer %s speaks protocol version %d, this host %d: upgrade one of them", addr, in.Version, Version)
	}
	if in.Compute != Compute() {
		return fmt.Errorf("peer %s: %w", addr, anotherBuild(Compute(), in.Compute))
	}
	return nil
}
