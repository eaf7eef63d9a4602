package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// TestNotSpillableReasonShown: a job that cannot spill on a daemon with
// peers (an Iceberg side table, or one outside the data roots) shows its
// spill decision as off, with why, in its status (`lastmile status`'s
// spill line); before, the reason went to the log alone and the job's
// status had no spill decision at all, as if the daemon had no peers. A
// job that can spill gets its spiller and no such reason.
func TestNotSpillableReasonShown(t *testing.T) {
	data := t.TempDir()
	writeTinyParquet(t, filepath.Join(data, "side.parquet"))
	d := apiDaemon(t, func(c *Config) {
		c.Roots = map[string]string{"data": data}
		c.Peers = PeersConfig{Addrs: []string{"127.0.0.1:1"}, Insecure: true}
	})
	if err := d.startPeers(d.Config()); err != nil {
		t.Fatal(err)
	}
	defer d.closePeers()
	outside := filepath.Join(t.TempDir(), "side.parquet")
	os.WriteFile(outside, nil, 0o644)
	for _, c := range []struct{ name, table, want string }{
		{"plain", filepath.Join(data, "side.parquet"), ""},
		{"iceberg", "iceberg:" + filepath.Join(data, "t/metadata/v1.metadata.json") + "?snapshot=7", "is an Iceberg table, which peers do not read"},
		{"outside", outside, "outside this host's data roots"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := fmt.Sprintf("version: 1\ninputs: [%s]\nbatch: {size: 8}\npipeline:\n  - join: {kind: anti, table: %q, on: a}\n",
				filepath.Join(data, "side.parquet"), c.table)
			job, err := spec.Parse("", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			j := &Job{d: d, id: c.name, name: c.name, spec: job, specText: text, log: d.log}
			sp, noSpill := j.spillFor()
			j.spill, j.noSpill = sp, noSpill
			v := j.spillViewLocked()
			switch {
			case c.want == "" && (sp == nil || noSpill != nil):
				t.Fatalf("a spillable job: spiller %v, reason %+v", sp, noSpill)
			case c.want != "" && (sp != nil || v == nil || v.On || !strings.Contains(v.Reason, c.want) || v.Since.IsZero()):
				t.Fatalf("spill decision %+v (spiller %v); want off since now, saying %q", v, sp, c.want)
			}
		})
	}
}
