package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/gpu"
	"github.com/lastmile/lastmile/spec"
)

// runGPUs lists the host's GPUs (NVML).
func runGPUs(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gpus", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	nvmlPath := fs.String("nvml", "", "path of libnvidia-ml.so.1 (default: the dynamic linker's search)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: no arguments expected", errUsage)
	}
	gpus, err := gpu.Inventory(gpu.Config{NVML: *nvmlPath})
	noGPU := ""
	switch {
	case gpu.NoGPU(err):
		noGPU = fmt.Sprintf("no GPU or driver found: %v", err)
	case err != nil:
		return err
	case len(gpus) == 0:
		noGPU = "no GPU found: NVML lists none"
	}
	if *asJSON {
		if gpus == nil {
			gpus = []gpu.GPU{}
		}
		return writeJSON(stdout, struct {
			GPUs  []gpu.GPU `json:"gpus"`
			NoGPU string    `json:"no_gpu,omitempty"`
		}{gpus, noGPU})
	}
	if noGPU != "" {
		_, err := fmt.Fprintln(stdout, noGPU)
		return err
	}
	return gpuTable(stdout, gpus)
}

func gpuTable(w io.Writer, gpus []gpu.GPU) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tUUID\tNAME\tMEMORY\tPCI BUS ID\tNUMA\tCPUS")
	for _, g := range gpus {
		if g.Err != "" {
			fmt.Fprintf(tw, "%d\t-\tunreadable: %s\t-\t-\t-\t-\n", g.Index, g.Err)
			continue
		}
		node := "-"
		if g.NUMANode >= 0 {
			node = fmt.Sprint(g.NUMANode)
		}
		cpus := gpu.CPUList(g.CPUs)
		if cpus == "" {
			cpus = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, g.UUID, g.Name, spec.Size(g.Memory), g.PCIBusID, node, cpus)
	}
	return tw.Flush()
}

// errNoGPU is gpu check's error on a host without a GPU or driver.
var errNoGPU = errors.New("nothing measured: run lastmile gpu check on a host with an NVIDIA GPU and driver")

// errChecksFailed is gpu check's error when it ran and a check failed.
var errChecksFailed = errors.New("GPU self-test failed")

// runGPU is `lastmile gpu check`.
func runGPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rest := args
	switch {
	case len(args) > 0 && args[0] == "check":
		rest = args[1:]
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		// lastmile gpu -h: the check's help.
	default:
		return fmt.Errorf("%w: want the subcommand check (lastmile gpu check)", errUsage)
	}
	fs := newFlags("gpu check", stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	sizes := fs.String("sizes", "1MiB,8MiB,64MiB", "copy sizes, comma separated")
	iters := fs.Int("iters", 20, "timed copies per measurement")
	dir := shmDirFlag(fs) // where the test rings go
	libcuda := fs.String("libcuda", "", "path of libcuda.so.1 (default $LASTMILE_LIBCUDA, else the linker's search)")
	nvmlPath := fs.String("nvml", "", "path of libnvidia-ml.so.1")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile gpu check [flags]\n\nSelf-tests a GPU host: lists its GPUs with their NUMA nodes, then measures\nhost-to-device GB/s from a ring slot registered in place, the same slot\npageable, cuMemAllocHost memory, and a NUMA-remote ring (docs/gpu.md).\n\nFlags:")
		printFlags(fs, "dir")
	}
	if err := parseArgs(fs, rest); err != nil {
		return err
	}
	cfg := gpu.CheckConfig{CUDA: cuda.Config{Library: *libcuda}, NVML: gpu.Config{NVML: *nvmlPath}, Iters: *iters, Dir: *dir}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := spec.ParseSize(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: -sizes: %q is not a size such as 8MiB", errUsage, s)
		}
		cfg.Sizes = append(cfg.Sizes, int64(n))
	}
	r, err := gpu.Check(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(stdout, r); err != nil {
			return err
		}
	} else if err := checkText(stdout, r); err != nil {
		return err
	}
	if r.NoGPU != "" {
		return errNoGPU
	}
	if !r.Passed() {
		return errChecksFailed
	}
	return nil
}

// checkText prints the report: GPUs, measurements, checks.
func checkText(w io.Writer, r *gpu.Report) error {
	if r.NoGPU != "" {
		_, err := fmt.Fprintln(w, r.NoGPU)
		return err
	}
	fmt.Fprintf(w, "GPUs (from %s, CUDA driver %d):\n", r.Inventory, r.Driver)
	if err := gpuTable(w, r.GPUs); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nHost-to-device bandwidth (wall time, copies queued back to back):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSOURCE\tHOST NODE\tSIZE\tGB/s")
	for _, m := range r.Measurements {
		node := "-"
		if m.NUMANode >= 0 {
			node = fmt.Sprint(m.NUMANode)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.2f\n", m.CUDADevice, m.Source, node, spec.Size(m.Bytes), m.GBps)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nChecks:")
	failed := 0
	for _, c := range r.Checks {
		verdict := "PASS"
		if !c.Pass {
			verdict, failed = "FAIL", failed+1
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", verdict, c.Name, c.Detail)
	}
	if failed == 0 {
		_, err := fmt.Fprintf(w, "all %d checks passed\n", len(r.Checks))
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d checks failed\n", failed, len(r.Checks))
	return err
}
