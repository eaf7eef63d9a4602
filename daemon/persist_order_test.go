package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A job's records are written in the order the job changed: persists at
// once (a trainer's post, the run's, the monitor's) never leave an older
// record on disk after a newer one, which a daemon killed then would
// restart from (the counts the trainers posted gone, a deal forgotten).
func TestPersistInOrder(t *testing.T) {
	abs, err := filepath.Abs("../testdata/small")
	if err != nil {
		t.Fatal(err)
	}
	d := apiDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
	var mu sync.Mutex
	last := map[string]int{}
	d.store.mu.Lock()
	d.store.wrote = func(data []byte) {
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if rec.Restarts < last[rec.ID] {
			t.Errorf("job %s written with %d restarts after %d", rec.ID, rec.Restarts, last[rec.ID])
		}
		last[rec.ID] = rec.Restarts
	}
	d.store.mu.Unlock()
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: po\ninputs: [" + abs + "]\nbatch: {size: 100}\nring: {slots: 4}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancelAndWait(t, j)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				j.mu.Lock()
				j.restarts++ // a change that a later write must keep
				j.mu.Unlock()
				j.persist()
			}
		}()
	}
	wg.Wait()
}
