package daemon

import (
	"strings"
	"testing"
)

// TestReviewReloadNamesStartOnlyKeys: roots, peer.* and peers.addrs/dns/tls
// are read once, at Start (startPeers: d.roots, d.peerSrv, d.pool). A
// reload that changes them is logged "configuration reloaded" with
// not_reloaded=[] (checked with the binary: SIGHUP after adding
// peer.listen, peers.addrs and roots logs not_reloaded=[] and nothing
// listens on peer.listen), while docs/daemon.md says the keys that do not
// reload "are logged as needing a restart". Worse, d.cfg takes the new
// values, so GET /v1/status and setHeapLimit (which adds peer.max_memory
// when peer.listen is set) describe a peer role that does not exist.
func TestReviewReloadNamesStartOnlyKeys(t *testing.T) {
	d, err := New(DefaultConfig(), nil, nil, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key    string
		change func(*Config)
	}{
		{"roots", func(c *Config) { c.Roots = map[string]string{"ctr": "/mnt/datasets/ctr"} }},
		{"peer.listen", func(c *Config) { c.Peer.Listen = "127.0.0.1:7942"; c.Peer.Insecure = true }},
		{"peers.addrs", func(c *Config) { c.Peers.Addrs = []string{"127.0.0.1:7941"}; c.Peers.Insecure = true }},
	} {
		cfg := d.Config()
		c.change(&cfg)
		ignored, err := d.Reload(cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		named := false
		for _, k := range ignored {
			if strings.HasPrefix(k, strings.SplitN(c.key, ".", 2)[0]) {
				named = true
			}
		}
		if !named {
			t.Errorf("a reload that changed %s (applied only at start) named %v as needing a restart; want %s among them", c.key, ignored, c.key)
		}
	}
	if got := d.Config(); got.Peer.Listen != "" || len(got.Roots) != 0 || len(got.Peers.Addrs) != 0 {
		t.Errorf("after the reloads the daemon's config says peer.listen=%q roots=%v peers.addrs=%v, but it serves no peer, maps no root and has no pool",
			got.Peer.Listen, got.Roots, got.Peers.Addrs)
	}
}

// TestReviewConfigErrorNamesLine: a YAML type error names its line ("line
// 1: cannot unmarshal !!str `many` into int"), but a bad duration or size
// (Duration.UnmarshalYAML, Bytes.UnmarshalYAML return the bare Set error)
// names neither the key nor the line: with a dozen duration keys and as
// many sizes, "parse config: want a duration such as 30s or 10m, got
// \"10\"" leaves the operator to search the file.
func TestReviewConfigErrorNamesLine(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"workers: 2\ngrace: 10\n", "line 2"},
		{"workers: 2\nmemory:\n  per_job: 8XB\n", "line 3"},
		{"workers: 2\ncontrol:\n  body_timeout: 5\n", "line 3"},
	} {
		_, err := ParseConfig(strings.NewReader(c.yaml))
		if err == nil {
			t.Fatalf("%q: no error", c.yaml)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q does not say %q", c.yaml, err, c.want)
		}
	}
}
