// Package s3test runs a real S3 server for tests and benchmarks:
// versitygw's embedded gateway over its posix backend, built from the
// nested module internal/testservers/s3 (so that versitygw's dependencies
// stay out of lastmile's go.mod) and started as a subprocess on a loopback
// port. A Proxy in front of it counts requests and bytes and injects
// faults.
//
// The server binary is built once per content of the nested module and Go
// version, into the user cache directory (LASTMILE_S3SERVER names a
// prebuilt one instead); the first build downloads versitygw's modules
// through the Go module proxy and takes a few minutes.
//
// This package imports nothing of lastmile's.
package s3test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Access and Secret are the server's root credentials.
const (
	Access = "lastmile"
	Secret = "lastmile-secret"
)

// Server is a running test server. Buckets are the directories under Root.
type Server struct {
	Addr     string // host:port
	Endpoint string // http://host:port
	Root     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	done     chan error
}

// moduleDir is the nested module's source directory.
func moduleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("s3test: cannot locate the source tree")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "internal", "testservers", "s3")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("s3test: the test server's module is not at %s (run from a lastmile checkout, or set LASTMILE_S3SERVER to a built server): %w", dir, err)
	}
	return dir, nil
}

var buildMu sync.Mutex

// Build returns the path of the server binary, building it if this
// content of the nested module has not been built yet.
func Build(ctx context.Context) (string, error) {
	if p := os.Getenv("LASTMILE_S3SERVER"); p != "" {
		return p, nil
	}
	dir, err := moduleDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("s3test: %w", err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "lastmile", "s3server-"+hex.EncodeToString(h.Sum(nil))[:16])
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	// go test runs packages in parallel processes: one builds, the others
	// wait for it on the lock file, then find the binary.
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("s3test: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	cmd.Dir = dir
	// GOFLAGS=-mod=mod lets a fresh machine fetch the modules go.sum pins.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("s3test: build the S3 test server in %s: %v\n%s", dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	return bin, nil
}

// Start builds (if needed) and starts a server serving the directories
// under root as buckets. Close stops it.
func Start(ctx context.Context, root string) (*Server, error) {
	bin, err := Build(ctx)
	if err != nil {
		return nil, err
	}
	sidecar, err := os.MkdirTemp("", "s3test-meta")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-root", root, "-sidecar", sidecar, "-access", Access, "-secret", Secret)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	s := &Server{Root: root, cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- addr
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { s.done <- cmd.Wait(); os.RemoveAll(sidecar) }()
	select {
	case s.Addr = <-ready:
		s.Endpoint = "http://" + s.Addr
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("s3test: server exited before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, errors.New("s3test: server not ready after 30s")
	}
}

// Close stops the server (closing its stdin stops it; a kill follows if
// it has not stopped within 5s).
func (s *Server) Close() error {
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	return nil
}

// Bucket makes bucket name (a directory under Root) and returns its path:
// files written there are objects.
func (s *Server) Bucket(name string) (string, error) {
	dir := filepath.Join(s.Root, name)
	return dir, os.MkdirAll(dir, 0o755)
}
