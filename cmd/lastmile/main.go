// Command lastmile is the command-line tool of lastmile: it generates
// sample data, runs a job in-process into shared-memory rings, reads and
// summarizes rings, and measures this machine (bench). Each subcommand is a
// function over its own flag.FlagSet so that tests can drive it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped by the Makefile with -ldflags -X main.version=...
var version = "dev"

type command struct {
	name, usage, summary string
	run                  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"gen", "gen [flags] [DIR]", "write deterministic recommender-style sample Parquet (and .npy, spam-user tables)", runGen},
		{"run", "run [flags] SPEC", "run a job in-process, producing into shared-memory rings", runRun},
		{"cat", "cat [flags] RING", "read a ring and summarize its batches", runCat},
		{"demo", "demo [flags]", "run the embedded demo job end to end with a separate consumer process", runDemo},
		{"bench", "bench [flags]", "measure memcpy, ring handoff, decode and decompression on this machine", runBench},
		{"schema", "schema [flags] SPEC|PATH...", "list the columns of a job's inputs or of Parquet files as lastmile reads them", runSchema},
		{"plan", "plan [flags] SPEC", "measure a pipeline here and say the cores, peers and memory a training job needs per GPU", runPlan},
		{"submit", "submit [flags] SPEC", "submit a job to lastmiled, or join the identical running one", runSubmit},
		{"jobs", "jobs [flags]", "list lastmiled's jobs", runJobs},
		{"status", "status [flags] [ID]", "show lastmiled's status, or one job and its rings", runStatus},
		{"cancel", "cancel [flags] ID...", "cancel lastmiled jobs", runCancel},
		{"top", "top [flags]", "show lastmiled's jobs and ranks live (rows/s, ring fill, stalls)", runTop},
		{"gpus", "gpus [flags]", "list this host's GPUs: UUID, memory, PCI bus id, NUMA node, CPUs", runGPUs},
		{"gpu", "gpu check [flags]", "self-test a GPU host: host-to-device GB/s from ring slots, pageable and pinned", runGPU},
		{"certs", "certs [flags] ca|NAME", "make the mutual-TLS CA and host certificates of lastmiled peers", runCerts},
		{"version", "version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) error {
			_, err := fmt.Fprintln(stdout, "lastmile", version)
			return err
		}},
	}
}

// errUsage marks errors after which the usage text helps.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lastmile COMMAND [flags] [args]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-26s %s\n", c.usage, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'lastmile COMMAND -h' for a command's flags.")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errFlagSaid):
			return 2
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "lastmile %s: %v\nusage: lastmile %s\n", c.name, err, c.usage)
			return 2
		case errors.Is(err, context.Canceled):
			fmt.Fprintf(stderr, "lastmile %s: interrupted\n", c.name)
			return 130
		default:
			fmt.Fprintf(stderr, "lastmile %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "lastmile: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// newFlags returns a FlagSet for a subcommand that reports errors instead of
// exiting, so that run can be tested.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lastmile "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
