// Package cudatest builds and reads the fake libcuda of package cuda's
// tests (../testdata/fakecuda.c), for the tests of any package that
// drives the GPU code on a host without one.
//
// It must only be imported by tests. It imports no lastmile package.
package cudatest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Source returns the path of fakecuda.c.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "fakecuda.c")
}

// Fake is a compiled fake libcuda and the log of its calls.
type Fake struct {
	// Library is the path of the fake libcuda.so.1.
	Library string
	// Log is the file the fake appends a line to per call.
	Log string
}

// Build gives the test a fresh copy of the fake (a fresh path, so the
// process loads it anew and its state and call counts start at zero) and
// points FAKECUDA_LOG and LASTMILE_LIBCUDA at it for the test (t.Setenv:
// the test must not be parallel). gcc compiles the fake once per test
// process; each test copies the result. It skips the test, saying why,
// when gcc is missing.
func Build(t testing.TB) *Fake {
	t.Helper()
	compiled := compileOnce()
	if compiled.skip != "" {
		t.Skip(compiled.skip)
	}
	if compiled.err != nil {
		t.Fatal(compiled.err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda.so.1")
	b, err := os.ReadFile(compiled.path)
	if err == nil {
		err = os.WriteFile(lib, b, 0o755)
	}
	if err != nil {
		t.Fatalf("copy the fake libcuda: %v", err)
	}
	f := &Fake{Library: lib, Log: filepath.Join(dir, "calls.log")}
	t.Setenv("FAKECUDA_LOG", f.Log)
	t.Setenv("FAKECUDA_FAIL", "")
	t.Setenv("FAKECUDA_DEVICES", "1")
	t.Setenv("LASTMILE_LIBCUDA", lib)
	return f
}

// compiledFake is the fake compiled once per test process.
type compiledFake struct {
	once sync.Once
	path string
	skip string // why the tests skip (no gcc)
	err  error
}

var compiled compiledFake

func compileOnce() *compiledFake {
	compiled.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			compiled.skip = "gcc not found: the fake libcuda tests need gcc to compile cuda/testdata/fakecuda.c (apt-get install gcc)"
			return
		}
		dir, err := os.MkdirTemp("", "fakecuda-")
		if err != nil {
			compiled.err = err
			return
		}
		// The directory outlives the test that compiled it: later tests
		// copy from it. It is small and in the temporary directory.
		compiled.path = filepath.Join(dir, "libcuda.so.1")
		out, err := exec.Command(gcc, "-Wall", "-Werror", "-O1", "-shared", "-fPIC", "-pthread", "-o", compiled.path, Source()).CombinedOutput()
		if err != nil {
			compiled.err = fmt.Errorf("compile the fake libcuda: %v\n%s", err, out)
		}
	})
	return &compiled
}

// Fail makes the fake fail calls: "name=code" or "name=code@n", comma
// separated (see fakecuda.c). "" fails nothing.
func (f *Fake) Fail(t testing.TB, spec string) { t.Helper(); t.Setenv("FAKECUDA_FAIL", spec) }

// Call is one logged call.
type Call struct {
	Name   string
	Args   map[string]string
	Result int
}

// Calls returns the logged calls in order, leaving out cuCtxSetCurrent
// (made before every call in a context) unless all is true.
func (f *Fake) Calls(t testing.TB, all bool) []Call {
	t.Helper()
	fh, err := os.Open(f.Log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var calls []Call
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		head, res, ok := strings.Cut(line, " -> ")
		if !ok {
			t.Fatalf("fake log line %q: no result", line)
		}
		fields := strings.Fields(head)
		c := Call{Name: fields[0], Args: map[string]string{}}
		c.Result, _ = strconv.Atoi(res)
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			c.Args[k] = v
		}
		if c.Name == "cuCtxSetCurrent" && !all {
			continue
		}
		calls = append(calls, c)
	}
	return calls
}

// Names returns the calls' names.
func Names(calls []Call) []string {
	n := make([]string, len(calls))
	for i, c := range calls {
		n[i] = c.Name
	}
	return n
}

// Find returns the calls named name.
func Find(calls []Call, name string) []Call {
	var out []Call
	for _, c := range calls {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}
