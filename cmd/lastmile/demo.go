package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lastmile/lastmile/datagen"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/spec"
)

//go:embed demo.yaml
var demoSpec []byte

// demoOptions are demo's flags once parsed.
type demoOptions struct {
	data     string
	rows     int64
	consumer string
	python   string
	epochs   int
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDemoFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := ensureDemoData(ctx, o, stdout); err != nil {
		return err
	}
	job, err := demoJob(o)
	if err != nil {
		return err
	}
	cmd, err := demoConsumer(ctx, o, job.Ring.Name)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	fmt.Fprintf(stdout, "producer: lastmile run (in this process, pid %d); consumer: %s (separate process)\n", os.Getpid(), strings.Join(cmd.Args, " "))
	st, err := runWithConsumer(ctx, job, cmd)
	if err != nil {
		return err
	}
	secs := st.Elapsed.Seconds()
	fmt.Fprintf(stdout, "producer: %d batches, %d rows, %.1f MB in %.2fs: %.0f rows/s, %.0f MB/s with %d decode workers\n",
		st.Batches, st.Rows, float64(st.Bytes)/1e6, secs, float64(st.Rows)/secs, float64(st.Bytes)/1e6/secs, st.Workers)
	return nil
}

// parseDemoFlags parses demo's flags; demo takes no arguments.
func parseDemoFlags(args []string, stderr io.Writer) (*demoOptions, error) {
	fs := newFlags("demo", stderr)
	o := &demoOptions{}
	fs.StringVar(&o.data, "data", "out/demo-data", "sample data directory; generated when it holds no Parquet files")
	fs.Int64Var(&o.rows, "rows", 1_000_000, "rows of sample data to generate")
	fs.StringVar(&o.consumer, "consumer", "auto", "consumer process: python (the trainer client), go (lastmile cat) or auto (python when numpy is importable)")
	fs.StringVar(&o.python, "python", pythonPath(), "python interpreter for the python consumer")
	fs.IntVar(&o.epochs, "epochs", 1, "epochs to run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile demo [flags]\n\nGenerates sample recommender Parquet (once), runs the embedded demo job in\nthis process and reads its ring from a separate consumer process.\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("%w: demo takes no arguments", errUsage)
	}
	return o, nil
}

// ensureDemoData generates the sample data unless o.data already holds
// Parquet files, so that only the first demo pays for it.
func ensureDemoData(ctx context.Context, o *demoOptions, stdout io.Writer) error {
	if m, _ := filepath.Glob(filepath.Join(o.data, "*.parquet")); len(m) == 0 {
		cfg := datagen.DefaultConfig()
		cfg.Rows, cfg.Files = o.rows, 4
		fmt.Fprintf(stdout, "generating %d rows of sample data in %s ...\n", cfg.Rows, o.data)
		t := time.Now()
		if _, err := datagen.Write(ctx, o.data, cfg); err != nil {
			return fmt.Errorf("generate sample data: %w", err)
		}
		fmt.Fprintf(stdout, "generated in %.1fs\n", time.Since(t).Seconds())
	}
	return nil
}

// demoJob is the embedded demo spec reading o.data, for o.epochs epochs.
func demoJob(o *demoOptions) (*spec.Job, error) {
	abs, err := filepath.Abs(o.data)
	if err != nil {
		return nil, err
	}
	src := bytes.Replace(demoSpec, []byte("[DATA]"), []byte("["+abs+"]"), 1)
	job, err := spec.Parse("demo.yaml (embedded)", src)
	if err != nil {
		return nil, fmt.Errorf("BUG: embedded demo spec: %w", err)
	}
	job.Epochs = &o.epochs
	// A per-run ring name, so that two demos on one host do not collide.
	job.Ring.Name = fmt.Sprintf("lastmile.demo.%d", os.Getpid())
	return job, nil
}

// demoConsumer is the command of the consumer process -consumer picks for
// ring: auto takes Python when numpy imports, so that a bare host still
// runs the demo with the Go consumer.
func demoConsumer(ctx context.Context, o *demoOptions, ring string) (*exec.Cmd, error) {
	kind := o.consumer
	if kind == "auto" {
		kind = "go"
		if exec.Command(o.python, "-c", "import numpy").Run() == nil {
			kind = "python"
		}
	}
	var cmd *exec.Cmd
	switch kind {
	case "python":
		cmd = exec.CommandContext(ctx, o.python, "-m", "lastmile", "cat", ring)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir())
	case "go":
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, self, "cat", ring)
	default:
		return nil, fmt.Errorf("%w: -consumer must be python, go or auto, got %q", errUsage, kind)
	}
	return cmd, nil
}

// runWithConsumer runs job in this process and starts cmd once its rings
// are ready, then waits for both; an error of either is returned.
func runWithConsumer(ctx context.Context, job *spec.Job, cmd *exec.Cmd) (engine.Stats, error) {
	// If the consumer exits early (a crash, a Python error), stop the
	// producer instead of waiting for a reader that is gone.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var werr, startErr error
	ready := false
	done := make(chan struct{})
	st, err := engine.Run(runCtx, job, engine.Options{
		Linger: true, Remove: true,
		Ready: func(rings []string) {
			ready = true
			if startErr = cmd.Start(); startErr != nil {
				cancel()
				close(done)
				return
			}
			go func() {
				werr = cmd.Wait()
				if werr != nil {
					cancel()
				}
				close(done)
			}()
		},
	})
	if startErr != nil {
		return st, fmt.Errorf("start consumer %q: %w", cmd.Path, startErr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		cancel()
	}
	if ready {
		<-done
	}
	if werr != nil {
		return st, errors.Join(err, fmt.Errorf("consumer %s: %w", cmd.Path, werr))
	}
	return st, err
}

// pythonPath is the interpreter for the Python client: $LASTMILE_PYTHON, or
// Debian's /usr/bin/python3.
func pythonPath() string {
	if p := os.Getenv("LASTMILE_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// pythonDir finds the python/ directory of the source tree, for running the
// client without installing it: next to the binary's bin/ or the working
// directory.
func pythonDir() string {
	var cands []string
	if self, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(self), "..", "python"))
	}
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, filepath.Join(wd, "python"), filepath.Join(wd, "..", "..", "python"))
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "lastmile", "__init__.py")); err == nil {
			return c
		}
	}
	return "python"
}
