package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// hostsKeeps is the filter of a hosts run: the rows it keeps. The hosts
// must count every unit's kept rows to deal the units between them.
const hostsFilter = "row_id % 7 != 3"

func hostsKeeps(id int64) bool { return id%7 != 3 }

// hostsRun injects process faults into a world split between two hosts,
// each with its own lastmiled serving its own ranks (torchrun --nnodes 2;
// engine/hosts.go), and checks that every row the filter keeps is
// recorded exactly once per epoch across the world's ranks. The job pads
// (batch.last: pad) so that no kept row is dropped, and its trainers leave
// the padding rows out. Faults hit either daemon (while it counts its
// units, adopts its rings, or serves them) and any trainer.
func hostsRun(t *testing.T, c *tally, rng *rand.Rand, seed uint64, data dataset) {
	dur, faults := 2*time.Second, 3
	if *chaosFull {
		dur, faults = 6*time.Second, 5
	}
	daemons := []*daemon{startDaemon(t, ""), startDaemon(t, "")}
	j := newHostsJob(t, daemons, rng, seed, data, dur)
	j.faults(c, rng, faults, func() {
		j.d = daemons[rng.IntN(len(daemons))]
		j.t.Logf("next fault: host %d's lastmiled, or any rank's trainer", indexOf(daemons, j.d))
	})
	j.finish(c)
}

// newHostsJob starts the trainers of a world of 2 hosts × 1 or 2 ranks,
// each submitting its host's share to that host's daemon, for 1 or 2
// epochs paced to last about dur.
func newHostsJob(t *testing.T, daemons []*daemon, rng *rand.Rand, seed uint64, data dataset, dur time.Duration) *job {
	j := &job{t: t, data: data, d: daemons[0], hosts: daemons, epochs: 1 + rng.IntN(2), keep: hostsKeeps}
	local := 1 + rng.IntN(2)
	world := len(daemons) * local
	spec := fmt.Sprintf("version: 1\nname: chaos-hosts-%d\ninputs: [%s]\ncolumns: [row_id, cat_0, dense_0]\n"+
		"batch: {size: 100, last: pad}\nworld_size: %d\nepochs: %d\nseed: %d\nshuffle: {units: true, buffer: 1000}\n"+
		"ring: {slots: 4}\ndecode: {max_unit_rows: 500}\npipeline:\n  - filter: %q\n",
		seed, data.dir, world, j.epochs, seed, hostsFilter)
	perRank := int(data.rows) * 6 / 7 / 100 / world * j.epochs
	for h, d := range daemons {
		dir := filepath.Join(d.dir, fmt.Sprintf("job-%d", seed))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for r := h * local; r < (h+1)*local; r++ {
			tr := newTrainer(t, dir, r, map[string]any{"spec": spec, "world_size": world, "socket": d.sock,
				"hosts": len(daemons), "host": h, "delay": dur.Seconds() / float64(perRank)})
			tr.start()
			j.trainers = append(j.trainers, tr)
		}
	}
	t.Logf("%d hosts of %d ranks, %d epochs of %d rows (%s kept), about %d batches per rank",
		len(daemons), local, j.epochs, data.rows, hostsFilter, perRank/j.epochs)
	return j
}

func indexOf(ds []*daemon, d *daemon) int {
	for i, o := range ds {
		if o == d {
			return i
		}
	}
	return -1
}
