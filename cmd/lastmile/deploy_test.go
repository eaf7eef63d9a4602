package main

// Checks of deploy/: the example configuration stays in sync with
// daemon.Config, and the unit file passes systemd-analyze where it exists.

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/daemon"
)

// yamlKeys lists the dotted yaml keys of a config struct.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		out = append(out, prefix+tag)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, yamlKeys(f.Type, prefix+tag+".")...)
		}
	}
	return out
}

func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/lastmiled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	// Every option is documented, commented out or not, under its section.
	for _, key := range yamlKeys(reflect.TypeOf(daemon.Config{}), "") {
		name := key[strings.LastIndex(key, ".")+1:]
		indent := strings.Repeat("  ", strings.Count(key, "."))
		re := regexp.MustCompile(`(?m)^` + indent + `#?` + regexp.QuoteMeta(name) + `:`)
		if !re.MatchString(text) {
			t.Errorf("deploy/lastmiled.yaml does not document %s", key)
		}
	}
	// With every option uncommented it is a valid configuration whose values
	// are the defaults (those that depend on the host aside).
	uncomment := regexp.MustCompile(`(?m)^(\s*)#(\w+:)`)
	cfg, err := daemon.ParseConfig(strings.NewReader(uncomment.ReplaceAllString(text, "$1$2")))
	if err != nil {
		t.Fatalf("uncommented example: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("uncommented example: %v", err)
	}
	def := daemon.DefaultConfig()
	cfg.Workers, cfg.Memory.Total, cfg.ShmDir = def.Workers, def.Memory.Total, def.ShmDir
	cfg.Weights = def.Weights
	if !reflect.DeepEqual(cfg.Values(), def) {
		t.Errorf("example values differ from DefaultConfig:\n got %+v\nwant %+v", cfg, def)
	}
	// As shipped (everything commented) it is the defaults.
	cfg, err = daemon.ParseConfig(strings.NewReader(text))
	if err != nil || !reflect.DeepEqual(cfg.Values(), def) {
		t.Errorf("shipped example is not the defaults: %v\n got %+v\nwant %+v", err, cfg, def)
	}
}

func TestUnitFile(t *testing.T) {
	data, err := os.ReadFile("../../deploy/lastmiled.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{
		"\nType=notify\n",
		"\nExecStart=/usr/local/bin/lastmiled -config /etc/lastmile/lastmiled.yaml\n",
		"\nRuntimeDirectory=lastmile\n",
		"\nStateDirectory=lastmile\n",
		"\nUser=lastmile\n",
		"\nReadWritePaths=/dev/shm\n",
		// the GPUs (NVML, the CUDA driver) and NUMA placement (docs/daemon-security.md)
		"\nPrivateDevices=no\n",
		"\nDeviceAllow=char-nvidia-frontend rw\n",
		"\nDeviceAllow=char-nvidia-uvm rw\n",
		"\nSystemCallFilter=~@resources\nSystemCallFilter=set_mempolicy\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", strings.TrimSpace(want))
		}
	}
	// The stop timeout must leave room for the drain.
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("unit lacks TimeoutStopSec=")
	}
	stop, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if drain := daemon.DefaultConfig().DrainTimeout.D(); stop < drain+10*time.Second {
		t.Errorf("TimeoutStopSec=%v leaves too little room for the default drain_timeout %v", stop, drain)
	}
	// The defaults of the unit and of the daemon agree.
	if def := daemon.DefaultConfig(); def.Socket != "/run/lastmile/lastmiled.sock" || def.StateDir != "/var/lib/lastmile" {
		t.Errorf("daemon defaults %s, %s do not match RuntimeDirectory=/StateDirectory=lastmile", def.Socket, def.StateDir)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed: deploy/check-unit.sh not run")
	}
	script, _ := filepath.Abs("../../deploy/check-unit.sh")
	out, err := exec.Command("sh", script).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/check-unit.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestPeerConfigs: the example peer configuration and the Kubernetes
// manifests' configurations are valid lastmiled configurations.
func TestPeerConfigs(t *testing.T) {
	check := func(name, text string) {
		t.Helper()
		cfg, err := daemon.ParseConfig(strings.NewReader(text))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	data, err := os.ReadFile("../../deploy/lastmiled-peer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check("deploy/lastmiled-peer.yaml", string(data))
	k8s, err := os.ReadFile("../../deploy/k8s/lastmile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The ConfigMap's files are indented block scalars.
	for _, file := range []string{"gpu.yaml", "peer.yaml"} {
		i := strings.Index(string(k8s), "  "+file+": |\n")
		if i < 0 {
			t.Fatalf("deploy/k8s/lastmile.yaml has no %s", file)
		}
		var lines []string
		for _, l := range strings.Split(string(k8s)[i+len(file)+6:], "\n") {
			if !strings.HasPrefix(l, "    ") {
				break
			}
			lines = append(lines, l[4:])
		}
		if len(lines) < 4 || !strings.Contains(strings.Join(lines, "\n"), "peer") {
			t.Fatalf("deploy/k8s/lastmile.yaml %s: read %q", file, lines)
		}
		check("deploy/k8s/lastmile.yaml "+file, strings.Join(lines, "\n"))
	}
}
