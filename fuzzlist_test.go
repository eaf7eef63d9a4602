package lastmile_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fuzzFunc is a fuzz test's declaration.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)

// TestMakeFuzzRunsEveryFuzzer: `make fuzz` runs every fuzz test of the
// repository, each in its package's directory, and says how many there
// are: a fuzzer left off the list is never fuzzed, only its seeds run.
func TestMakeFuzzRunsEveryFuzzer(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\t\$\(FUZZONE\) (\S+) (Fuzz\w+)$`).FindAllStringSubmatch(string(mk), -1) {
		listed[m[1]+" "+m[2]] = true
	}
	var found []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(b), -1) {
			found = append(found, filepath.Dir(path)+" "+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if !listed[f] {
			t.Errorf("%s is not in the Makefile's fuzz target", f)
		}
		delete(listed, f)
	}
	for f := range listed {
		t.Errorf("the Makefile's fuzz target runs %s, which is not a fuzz test", f)
	}
	if n := regexp.MustCompile(`each of the (\d+) fuzzers`).FindStringSubmatch(string(mk)); n == nil || n[1] != strconv.Itoa(len(found)) {
		t.Errorf("the Makefile's comment on fuzz counts %v fuzzers; there are %d", n, len(found))
	}
}
