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

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	data := fs.String("data", "out/demo-data", "sample data directory; generated when it holds no Parquet files")
	rows := fs.Int64("rows", 1_000_000, "rows of sample data to generate")
	consumer := fs.String("consumer", "auto", "consumer process: python (the trainer client), go (lastmile cat) or auto (python when numpy is importable)")
	python := fs.String("python", pythonPath(), "python interpreter for the python consumer")
	epochs := fs.Int("epochs", 1, "epochs to run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile demo [flags]\n\nGenerates sample recommender Parquet (once), runs the embedded demo job in\nthis process and reads its ring from a separate consumer process.\n\nFlags:")
		printFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: demo takes no arguments", errUsage)
	}
	if m, _ := filepath.Glob(filepath.Join(*data, "*.parquet")); len(m) == 0 {
		cfg := datagen.DefaultConfig()
		cfg.Rows, cfg.Files = *rows, 4
		fmt.Fprintf(stdout, "generating %d rows of sample data in %s ...\n", cfg.Rows, *data)
		t := time.Now()
		if _, err := datagen.Write(ctx, *data, cfg); err != nil {
			return fmt.Errorf("generate sample data: %w", err)
		}
		fmt.Fprintf(stdout, "generated in %.1fs\n", time.Since(t).Seconds())
	}
	abs, err := filepath.Abs(*data)
	if err != nil {
		return err
	}
	src := bytes.Replace(demoSpec, []byte("[DATA]"), []byte("["+abs+"]"), 1)
	job, err := spec.Parse("demo.yaml (embedded)", src)
	if err != nil {
		return fmt.Errorf("BUG: embedded demo spec: %w", err)
	}
	job.Epochs = epochs
	// A per-run ring name, so that two demos on one host do not collide.
	job.Ring.Name = fmt.Sprintf("lastmile.demo.%d", os.Getpid())

	kind := *consumer
	if kind == "auto" {
		kind = "go"
		if exec.Command(*python, "-c", "import numpy").Run() == nil {
			kind = "python"
		}
	}
	var cmd *exec.Cmd
	switch kind {
	case "python":
		cmd = exec.CommandContext(ctx, *python, "-m", "lastmile", "cat", job.Ring.Name)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir())
	case "go":
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, self, "cat", job.Ring.Name)
	default:
		return fmt.Errorf("%w: -consumer must be python, go or auto, got %q", errUsage, kind)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	fmt.Fprintf(stdout, "producer: lastmile run (in this process, pid %d); consumer: %s (separate process)\n", os.Getpid(), strings.Join(cmd.Args, " "))

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
		return fmt.Errorf("start consumer %q: %w", cmd.Path, startErr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		cancel()
	}
	if ready {
		<-done
	}
	if werr != nil {
		return errors.Join(err, fmt.Errorf("consumer %s: %w", cmd.Path, werr))
	}
	if err != nil {
		return err
	}
	secs := st.Elapsed.Seconds()
	fmt.Fprintf(stdout, "producer: %d batches, %d rows, %.1f MB in %.2fs: %.0f rows/s, %.0f MB/s with %d decode workers\n",
		st.Batches, st.Rows, float64(st.Bytes)/1e6, secs, float64(st.Rows)/secs, float64(st.Bytes)/1e6/secs, st.Workers)
	return nil
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
