package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/lastmile/lastmile/gpu"
)

// printJobGPU prints a job's GPU staging and placement (the "gpu" part
// of the daemon's job view) after printJob's table; nothing for a daemon
// that does not report one.
func printJobGPU(w io.Writer, raw json.RawMessage) error {
	var v struct {
		GPU *struct {
			Staging   string            `json:"staging"`
			Placement []gpu.Placement   `json:"placement"`
			Device    []gpu.RankStaging `json:"device_staging"`
		} `json:"gpu"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.GPU == nil {
		return nil
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "gpu staging\t%s\n", v.GPU.Staging)
	for _, p := range v.GPU.Placement {
		where := "not placed: " + p.Why
		if p.GPU >= 0 {
			node := "ring pages unplaced"
			if p.NUMANode >= 0 {
				node = fmt.Sprintf("ring pages on NUMA node %d", p.NUMANode)
			}
			where = fmt.Sprintf("GPU %d %s (%s), %s, CPUs %s", p.GPU, p.UUID, p.Why, node, p.CPUs)
		}
		fmt.Fprintf(tw, "rank %d\t%s\n", p.Rank, where)
	}
	if err := tw.Flush(); err != nil || len(v.GPU.Device) == 0 {
		return err
	}
	// Device staging (gpu.staging: device): a table of its own.
	tw = newTable(w)
	for _, d := range v.GPU.Device {
		what := fmt.Sprintf("on the GPU (%s) by lastmiled, %d batches", d.PCIBusID, d.Staged)
		if d.Mode != "device" {
			what = fmt.Sprintf("fell back to host staging after %d batches: %s", d.Staged, d.Why)
		}
		fmt.Fprintf(tw, "rank %d staging\t%s\n", d.Rank, what)
	}
	return tw.Flush()
}
