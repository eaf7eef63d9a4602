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

// TestValidatePeers: every refusal of the peer: and peers: sections names
// its field and says what to do, and the configurations that work pass.
func TestValidatePeers(t *testing.T) {
	const (
		roots  = "roots: {ctr: /mnt/datasets/ctr}\n"
		tls    = "{ca: /c/ca.pem, cert: /c/h.pem, key: /c/h-key.pem}"
		peer   = roots + "peer: {listen: \":7941\", tls: " + tls + "}\n"
		peers  = roots + "peers: {addrs: [\"10.0.0.7:7941\"], tls: " + tls + "}\n"
		loFix  = "or listen on a loopback address"
		tlsFix = "configure peers.tls"
	)
	for _, c := range []struct {
		name, yaml string
		field      string // "": valid
		says       string // in the error
	}{
		{"a peer with TLS", peer, "", ""},
		{"a peer with TLS on an address", roots + "peer: {listen: \"10.0.0.7:7941\", tls: " + tls + "}\n", "", ""},
		{"an insecure peer on 127.0.0.1", roots + "peer: {listen: \"127.0.0.1:7941\", insecure: true}\n", "", ""},
		{"an insecure peer on ::1", roots + "peer: {listen: \"[::1]:7941\", insecure: true}\n", "", ""},
		{"an insecure peer on localhost", roots + "peer: {listen: \"localhost:7941\", insecure: true}\n", "", ""},
		{"peers with TLS", peers, "", ""},
		{"peers by DNS with TLS", roots + "peers: {dns: \"peers.ml.svc:7941\", tls: " + tls + ", spill: always}\n", "", ""},
		{"insecure loopback peers", roots + "peers: {addrs: [\"127.0.0.1:7941\", \"localhost:7942\", \"[::1]:7943\"], insecure: true}\n", "", ""},
		{"insecure peers by DNS of localhost", roots + "peers: {dns: \"localhost:7941\", insecure: true}\n", "", ""},
		{"both sides", peer + "peers: {addrs: [\"10.0.0.7:7941\"], tls: " + tls + "}\n", "", ""},

		{"a bad root name", "roots: {.ctr: /mnt/x}\n", "roots", "must not start with '.'"},
		{"listen without a port", roots + "peer: {listen: \"10.0.0.7\", tls: " + tls + "}\n", "peer.listen", "want host:port"},
		{"a peer without TLS", roots + "peer: {listen: \":7941\"}\n", "peer.tls", "needs ca, cert and key"},
		{"a peer without a key", roots + "peer: {listen: \":7941\", tls: {ca: /c/ca.pem, cert: /c/h.pem}}\n", "peer.tls", "needs ca, cert and key"},
		{"a peer without roots", "peer: {listen: \":7941\", tls: " + tls + "}\n", "roots", "list them"},
		{"an insecure peer on every interface", roots + "peer: {listen: \":7941\", insecure: true}\n", "peer.insecure", loFix},
		{"an insecure peer on 0.0.0.0", roots + "peer: {listen: \"0.0.0.0:7941\", insecure: true}\n", "peer.insecure", loFix},
		{"an insecure peer on an address", roots + "peer: {listen: \"10.0.0.7:7941\", insecure: true}\n", "peer.insecure", "configure peer.tls"},
		{"an insecure peer on a name", roots + "peer: {listen: \"cpu-7.peers.svc:7941\", insecure: true}\n", "peer.insecure", loFix},
		{"an unknown spill", roots + "peers: {spill: sometimes}\n", "peers.spill", `"auto" or "always"`},
		{"peers without TLS", roots + "peers: {addrs: [\"10.0.0.7:7941\"]}\n", "peers.tls", "needs ca, cert and key"},
		{"peers without roots", "peers: {addrs: [\"10.0.0.7:7941\"], tls: " + tls + "}\n", "roots", "list the roots"},
		{"a peer address without a port", roots + "peers: {addrs: [\"10.0.0.7\"], tls: " + tls + "}\n", "peers.addrs", "want host:port"},
		{"a DNS name without a port", roots + "peers: {dns: \"peers.ml.svc\", tls: " + tls + "}\n", "peers.dns", "want host:port"},
		{"insecure peers elsewhere", roots + "peers: {addrs: [\"127.0.0.1:7941\", \"10.0.0.7:7941\"], insecure: true}\n", "peers.insecure", tlsFix},
		{"insecure peers by DNS", roots + "peers: {dns: \"peers.ml.svc:7941\", insecure: true}\n", "peers.insecure", "may resolve outside loopback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if fields := configFields(err); len(fields) != 1 || fields[0] != c.field {
				t.Fatalf("errors %v name %v, want only %s", err, fields, c.field)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v: does not say %q", err, c.says)
			}
		})
	}
}

// configFields is the fields Validate's joined errors name.
func configFields(err error) []string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	var fields []string
	for _, e := range errs {
		var ce *ConfigError
		if errors.As(e, &ce) {
			fields = append(fields, ce.Field)
		} else {
			fields = append(fields, "?"+e.Error())
		}
	}
	return fields
}
