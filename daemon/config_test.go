package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfig(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	c, err := ParseConfig(strings.NewReader(""))
	if err != nil || c.Socket != def.Socket || c.Grace != def.Grace {
		t.Fatalf("empty config: %+v, %v", c, err)
	}
	c, err = ParseConfig(strings.NewReader("socket: /tmp/x.sock\nworkers: 3\ngrace: 90s\nmemory:\n  per_job: 8GiB\n  total: 32GiB\nweights: {ctr: 3}\nlog: {level: debug, format: json}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/tmp/x.sock" || c.Workers != 3 || c.Grace.D() != 90*time.Second || c.Memory.PerJob != 8<<30 ||
		c.Memory.Total != 32<<30 || c.Weights["ctr"] != 3 || c.Log.Level != "debug" || c.Log.Format != "json" || c.StateDir != def.StateDir {
		t.Fatalf("parsed %+v", c)
	}
	if _, err := ParseConfig(strings.NewReader("sockett: /x\n")); err == nil || !strings.Contains(err.Error(), "sockett") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := ParseConfig(strings.NewReader("grace: soon\n")); err == nil {
		t.Error("bad duration accepted")
	}
	f := func(yaml, field string) {
		t.Helper()
		c, err := ParseConfig(strings.NewReader(yaml))
		if err == nil {
			err = c.Validate()
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%q: %v, want an error naming %s", yaml, err, field)
		}
	}
	f("socket: relative.sock\n", "socket")
	f("socket_mode: rw\n", "socket_mode")
	f("workers: 0\n", "workers")
	f("grace: 10ms\n", "grace")
	f("default_weight: 0\n", "default_weight")
	f("weights: {x: 5000}\n", "weights.x")
	f("log: {level: loud}\n", "log.level")
	f("log: {format: xml}\n", "log.format")
	f("admin_group: no-such-group-here\n", "admin_group")

	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml"), true); err != nil {
		t.Errorf("missing default file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing named file: %v", err)
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &record{ID: "abc123def456", Name: "j", Spec: "name: j\n", State: "running", Ranks: []rankRec{{Generation: 7}}}
	if err := s.put(rec); err != nil {
		t.Fatal(err)
	}
	rec.State = "done"
	if err := s.put(rec); err != nil {
		t.Fatal(err)
	}
	// A torn temporary file from a crash, and garbage, are skipped.
	os.WriteFile(filepath.Join(s.dir, ".zzz.tmp"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "bad.json"), []byte("{"), 0o600)
	s, _ = openStore(dir)
	recs, errs := s.load()
	if len(recs) != 1 || recs[0].State != "done" || recs[0].Ranks[0].Generation != 7 || len(errs) != 1 {
		t.Fatalf("load: %+v, errors %v", recs, errs)
	}
	if _, err := os.Stat(filepath.Join(s.dir, ".zzz.tmp")); !os.IsNotExist(err) {
		t.Error("temporary file left behind")
	}
	if err := s.remove(rec.ID); err != nil {
		t.Fatal(err)
	}
	if recs, _ := s.load(); len(recs) != 0 {
		t.Fatalf("after remove: %+v", recs)
	}
}
