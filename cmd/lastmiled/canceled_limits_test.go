package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCanceledJobsDoNotEscapeUserLimits: limits.jobs_per_user and
// limits.memory_per_user (and memory.total) count a job while its rings
// exist, ended or not. A user at the bound who cancels a job and submits
// another under a new name, again and again, must never hold more than its
// bounds in shm_dir: a canceled job no trainer reads has its rings removed
// at once (so the next submission is accepted), and one whose rings stay
// counts until they are removed (daemon TestUserHold).
func TestCanceledJobsDoNotEscapeUserLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as uid 65534")
	}
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("limits:\n  jobs_per_user: 1\n"), 0o644)
	e.start("-socket-mode", "0666")
	data := filepath.Join(e.dir, "data")
	os.MkdirAll(data, 0o755)
	copySmallData(t, data)
	var charge int64
	const rounds = 4
	for i := 0; i < rounds; i++ {
		name := "cyc" + string(rune('a'+i))
		b, _ := json.Marshal(map[string]any{"spec": specFor(name, data, "epochs: 0\n")})
		code, body := requestAsNobody(t, e, "POST", "/v1/jobs", string(b))
		if code != 201 {
			t.Fatalf("round %d: submit %s: %d %s", i, name, code, body)
		}
		var j jobJSON
		json.Unmarshal([]byte(body), &j)
		charge = j.Memory
		ring := filepath.Join(e.shm, "lastmile."+name)
		waitFor(t, "ring of "+name, 20*time.Second, func() bool { _, err := os.Stat(ring); return err == nil })
		if code, body := requestAsNobody(t, e, "DELETE", "/v1/jobs/"+name, ""); code != 200 {
			t.Fatalf("cancel %s: %d %s", name, code, body)
		}
	}
	var held int64
	var rings []string
	ents, _ := os.ReadDir(e.shm)
	for _, de := range ents {
		if !strings.HasPrefix(de.Name(), "lastmile.") {
			continue
		}
		if fi, err := de.Info(); err == nil {
			held += fi.Size()
			rings = append(rings, de.Name())
		}
	}
	if len(rings) > 1 {
		t.Errorf("uid 65534, limited to 1 job (each charged %d bytes), holds %d rings of %d bytes in all in shm_dir after %d submit+cancel rounds: %v; "+
			"canceled jobs' rings count against no limit for the grace period", charge, len(rings), held, rounds, rings)
	}
}
