// Package engine runs a lastmile job: it plans the input files into work
// units, decodes them on the worker pool, puts the results back in plan
// order, cuts them into batches, deals the batches to ranks and packs each
// into its rank's shared-memory ring.
//
//	plan (decode.PlanFiles) → pool (decode, row-local ops) → reorder (pool.Run)
//	  → batch and deal to ranks (batcher) → pack into ring slots (shm)
//
// The same engine serves `lastmile run` (in-process, no daemon) and the
// lastmiled daemon. Everything after the reorder runs on one goroutine, so
// the batches a run produces depend only on the input, the spec and the
// seed, never on the number of workers.
//
// engine may import the leaf packages (column, decode, pool, cpus, shm,
// spec); it must never import daemon, bench or cmd.
package engine
