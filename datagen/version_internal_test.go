package datagen

import (
	"os"
	"strings"
	"testing"
)

// TestParquetGoVersion keeps the created_by string in step with the
// parquet-go version go.mod requires. (Test binaries carry no dependency
// versions in their build info, so go.mod is read directly.)
func TestParquetGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) >= 2 && f[0] == "github.com/parquet-go/parquet-go" {
			if got := strings.TrimPrefix(f[1], "v"); got != parquetGoVersion {
				t.Fatalf("go.mod requires parquet-go %s but created_by says %s: update parquetGoVersion and regenerate the fixtures", got, parquetGoVersion)
			}
			return
		}
	}
	t.Fatal("go.mod does not require github.com/parquet-go/parquet-go")
}
