package daemon

import (
	"slices"
	"strings"
	"testing"
)

// TestReloadNamesStartOnlyKeys: roots, peer.* and peers.addrs/dns/tls
// are read once, at Start (startPeers: d.roots, d.peerSrv, d.pool). A
// reload that changes them must name them as needing a restart (the
// "not_reloaded" of the log, as docs/daemon.md promises) and keep their old
// values in the config in effect: GET /v1/status and setHeapLimit (which
// adds peer.max_memory while peer.listen is set) must not describe a peer
// role, a pool or roots that do not exist.
func TestReloadNamesStartOnlyKeys(t *testing.T) {
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
	if got := d.RestartNeeded(); !slices.Contains(got, "peers.addrs") {
		t.Errorf("after the last reload, restart_needed is %v; want peers.addrs among them", got)
	}
	if got := d.Config(); got.Peer.Listen != "" || len(got.Roots) != 0 || len(got.Peers.Addrs) != 0 {
		t.Errorf("after the reloads the daemon's config says peer.listen=%q roots=%v peers.addrs=%v, but it serves no peer, maps no root and has no pool",
			got.Peer.Listen, got.Roots, got.Peers.Addrs)
	}
}
