package ops

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps ops below the engine: it may import column, expr,
// spec and decode, and no other lastmile package.
func TestImports(t *testing.T) {
	allowed := map[string]bool{"column": true, "expr": true, "spec": true, "decode": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(path, "github.com/lastmile/lastmile/")
			if ours && !allowed[rest] {
				t.Errorf("%s imports %s: ops may import only column, expr, spec and decode of lastmile's packages", name, path)
			}
		}
	}
}
