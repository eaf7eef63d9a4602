package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigReportsEveryMistake: lastmiled -check-config reports
// every mistake of the file at once (docs/daemon.md, "Configuration"): an
// unknown key and a value out of range together, not the range error only
// after the unknown key was fixed.
func TestCheckConfigReportsEveryMistake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lastmiled.yaml")
	if err := os.WriteFile(path, []byte("garce: 3m\nworkers: -3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"-config", path, "-check-config"}, &out, &errb)
	msg := errb.String()
	if code == 0 || !strings.Contains(msg, "lastmiled.yaml:1: garce: unknown field") || !strings.Contains(msg, "lastmiled.yaml:2:") || !strings.Contains(msg, "workers") {
		t.Fatalf("exit %d, %q; want both the unknown key (line 1) and workers out of range (line 2)", code, msg)
	}
	// A flag that overrides the bad value: only the unknown key is left.
	errb.Reset()
	run([]string{"-config", path, "-check-config", "-workers", "2"}, &out, &errb)
	if msg := errb.String(); strings.Contains(msg, "lastmiled.yaml:2:") {
		t.Errorf("-workers 2 given: %q; want the file's workers not reported", msg)
	}
}

// TestCheckConfigOpensFiles: -check-config, which the example config tells
// the operator to run before applying a change, also opens what the start
// opens: the peer's and the pool's TLS files and the data roots. It said
// "configuration OK" for deploy/lastmiled-peer.yaml on a host with
// neither, and the start then failed.
func TestCheckConfigOpensFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lastmiled.yaml")
	conf := "roots: {ctr: " + dir + "/no-such-root}\npeer:\n  listen: \":7941\"\n  tls: {ca: " + dir + "/ca.pem, cert: " + dir + "/cpu-7.pem, key: " + dir + "/cpu-7-key.pem}\n" +
		"peers:\n  addrs: [\"10.0.0.7:7941\"]\n  tls: {ca: " + dir + "/ca.pem, cert: " + dir + "/gpu-2.pem, key: " + dir + "/gpu-2-key.pem}\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"-config", path, "-check-config"}, &out, &errb)
	msg := errb.String()
	if code == 0 {
		t.Fatalf("exit 0 (%q); want the missing root and TLS files refused", out.String())
	}
	for _, want := range []string{"roots.ctr", "no-such-root", "peer.tls", "peers.tls", "ca.pem"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}
