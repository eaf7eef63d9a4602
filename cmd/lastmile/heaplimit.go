package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

// limitHeap sets the Go soft memory limit of a process that runs job to
// the job's accounted memory (engine.HeapLimit), unless GOMEMLIMIT is set
// in the environment, which then wins. It returns the footprint, or an
// error from planning it, which the caller may ignore (the run plans
// again and reports it).
func limitHeap(ctx context.Context, job *spec.Job, fsys decode.FS, log *slog.Logger) (engine.Footprint, error) {
	fp, err := engine.EstimateFootprint(ctx, job, fsys)
	if err != nil {
		return fp, err
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		limit := engine.HeapLimit(fp)
		debug.SetMemoryLimit(limit)
		log.Info("heap limit", "bytes", limit, "rings", fp.RingBytes, "units", int64(fp.InFlight)*fp.UnitBytes,
			"shuffle", fp.ShuffleBytes, "cache", fp.CacheBytes, "side_tables", fp.SideBytes)
	}
	return fp, nil
}
