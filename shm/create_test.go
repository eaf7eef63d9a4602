package shm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

func TestFileMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, want os.FileMode
	}{{0, 0o600}, {0o640, 0o640}, {0o666, 0o666}} {
		cfg := testConfig(t, "m"+strconv.Itoa(int(tc.mode)), 1)
		cfg.Mode = tc.mode
		p := create(t, cfg)
		st, err := os.Stat(p.Path())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != tc.want {
			t.Errorf("Mode %o: file mode %o, want %o", tc.mode, st.Mode().Perm(), tc.want)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := func() shm.Config {
		return shm.Config{Dir: dir, Name: "v", SlotSize: 8192, Fields: []shm.Field{{Name: "a", Kind: shm.Dense, DType: shm.Int64}}}
	}
	for _, tc := range []struct {
		desc string
		edit func(*shm.Config)
		want string
	}{
		{"empty name", func(c *shm.Config) { c.Name = "" }, "1 to 200 bytes"},
		{"dot name", func(c *shm.Config) { c.Name = ".x" }, "must not start with '.'"},
		{"slash", func(c *shm.Config) { c.Name = "a/b" }, "is not one of"},
		{"long name", func(c *shm.Config) { c.Name = strings.Repeat("a", 201) }, "1 to 200 bytes"},
		{"negative slots", func(c *shm.Config) { c.Slots = -1 }, "slot count -1"},
		{"too many slots", func(c *shm.Config) { c.Slots = 65537 }, "slot count 65537"},
		{"huge slots", func(c *shm.Config) { c.SlotSize = 1 << 41 }, "slot size"},
		{"huge file", func(c *shm.Config) { c.Slots = 65536; c.SlotSize = 1 << 40 }, "more than the"},
		{"mode bits", func(c *shm.Config) { c.Mode = os.ModeSetuid | 0o600 }, "permission bits"},
		{"missing dir", func(c *shm.Config) { c.Dir = filepath.Join(dir, "nope") }, "ring directory"},
		{"dup field", func(c *shm.Config) { c.Fields = append(c.Fields, c.Fields[0]) }, "both named"},
		{"no field name", func(c *shm.Config) { c.Fields[0].Name = "" }, "name"},
		{"long field name", func(c *shm.Config) { c.Fields[0].Name = strings.Repeat("f", 64) }, "1 to 63 bytes"},
		{"bad dtype", func(c *shm.Config) { c.Fields[0].DType = 11 }, "unknown dtype"},
		{"bad kind", func(c *shm.Config) { c.Fields[0].Kind = 3 }, "unknown kind"},
		{"ragged dims", func(c *shm.Config) { c.Fields[0].Kind = shm.Ragged; c.Fields[0].Dims = []int64{2} }, "no trailing"},
		{"4 dims", func(c *shm.Config) { c.Fields[0].Dims = []int64{1, 2, 3, 4} }, "at most 3"},
		{"zero dim", func(c *shm.Config) { c.Fields[0].Dims = []int64{0} }, "want 1 to"},
		{"utf8 dense", func(c *shm.Config) { c.Fields[0].UTF8 = true }, "UTF-8 flag"},
		{"utf8 int64", func(c *shm.Config) { c.Fields[0].Kind = shm.Ragged; c.Fields[0].UTF8 = true }, "needs dtype uint8"},
		{"table too big", func(c *shm.Config) {
			c.Fields = nil
			for i := 0; i < 100; i++ {
				c.Fields = append(c.Fields, shm.Field{Name: "f" + strconv.Itoa(i), Kind: shm.Ragged, DType: shm.Int8, Nullable: true})
			}
		}, "cannot hold the tensor table"},
	} {
		cfg := good()
		tc.edit(&cfg)
		_, err := shm.Create(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "create ring") {
			t.Errorf("%s: %v, want an error mentioning %q", tc.desc, err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed creates left %d files", len(ents))
	}
}

func TestSlotSizeRounding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want int64 }{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192},
		{2<<20 - 1, 2 << 20}, {2 << 20, 2 << 20}, {2<<20 + 1, 4 << 20}, {5 << 20, 6 << 20},
	} {
		if got := shm.RoundSlotSize(tc.in); got != tc.want {
			t.Errorf("RoundSlotSize(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
