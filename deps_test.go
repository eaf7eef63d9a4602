// Package lastmile_test holds repository-wide checks. This file enforces
// the import graph: leaf packages import nothing of ours, and the layers
// only import downwards (cmd → bench → daemon → peer → engine → ops → leaves).
package lastmile_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/lastmile/lastmile/"

// allowed lists, for each package of ours, the packages of ours it may
// import. A package missing here fails the test: decide where it belongs.
var allowed = map[string][]string{
	"column": {},
	"cpus":   {},
	"pool":   {},
	"shm":    {},
	"spec":   {"internal/suggest"},
	"cuda":   {},
	"asuser": {},
	"roots":  {},
	"plan":   {},
	"expr":   {"column", "internal/suggest"},
	// The "did you mean" rule, shared by spec, expr and ops.
	"internal/suggest": {},
	"decode":           {"column"},
	// objstore implements decode's source interfaces for S3; s3test runs
	// the S3 test server (a nested module under internal/testservers).
	"objstore":                            {"decode"},
	"objstore/s3test":                     {},
	"internal/testservers/s3":             {},
	"internal/testservers/s3/clientbench": {},
	"datagen":                             {"column"},
	"iceberg":                             {"column", "decode", "expr"},
	// Tests' table writer.
	"iceberg/icebergtest": {"iceberg"},
	"ops":                 {"column", "expr", "spec", "decode", "iceberg", "internal/suggest"},
	"engine":              {"column", "cpus", "decode", "pool", "shm", "spec", "ops", "expr", "iceberg"},
	"peer":                {"asuser", "column", "cpus", "decode", "pool", "shm", "spec", "ops", "expr", "engine", "roots", "iceberg"},
	"daemon":              {"asuser", "column", "cpus", "decode", "pool", "shm", "spec", "ops", "expr", "engine", "peer", "roots", "plan", "gpu", "cuda", "iceberg", "objstore"},
	"bench":               {"column", "cpus", "decode", "pool", "shm", "spec", "ops", "expr", "engine", "datagen", "peer", "roots", "plan", "iceberg", "objstore", "objstore/s3test"},
	// GPU inventory, placement and the self-test.
	"gpu": {"cuda", "shm"},
	// Test helper that builds the fake libcuda; imported by tests only.
	"cuda/cudatest": {},
	// Commands may use everything.
	"cmd/lastmile":  nil,
	"cmd/lastmiled": nil,
}

func TestImportGraph(t *testing.T) {
	pkgs := map[string]map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "python" || name == "out" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if pkgs[dir] == nil {
			pkgs[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) {
				pkgs[dir][strings.TrimPrefix(p, module)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		if dir == "." {
			continue
		}
		ok, known := allowed[dir]
		if !known {
			t.Errorf("package %s is not in the import graph of deps_test.go: add it with the packages it may import", dir)
			continue
		}
		if ok == nil && strings.HasPrefix(dir, "cmd/") {
			continue
		}
		set := map[string]bool{}
		for _, a := range ok {
			set[a] = true
		}
		for imp := range pkgs[dir] {
			if !set[imp] {
				t.Errorf("%s imports %s, which the layering forbids (allowed: %v)", dir, imp, ok)
			}
		}
	}
}
