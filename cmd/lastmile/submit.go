package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("submit", stderr)
	socket := socketFlag(fs)
	worldSize := fs.Int("world-size", 0, "number of trainer ranks (default: the spec's world_size)")
	hosts := fs.Int("hosts", 0, "the hosts the world's ranks run on (torchrun's --nnodes): lastmiled serves one host's share")
	host := fs.Int("host", 0, "which of the -hosts this is, from 0 (torchrun's --node-rank)")
	weight := fs.Int("weight", 0, "CPU share weight against other jobs, 1 to 1000 (default: the daemon's default_weight)")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile submit [flags] SPEC\n\nSubmits the job in SPEC (YAML or JSON; - reads standard input) to lastmiled,\nor joins the identical job that is already running. Relative inputs are\nresolved against SPEC's directory (the working directory for -).\n\nFlags:")
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one job spec file, got %d arguments", errUsage, fs.NArg())
	}
	if *worldSize < 0 {
		return fmt.Errorf("%w: -world-size %d: want at least 1", errUsage, *worldSize)
	}
	if *weight < 0 {
		return fmt.Errorf("%w: -weight %d: want 1 to 1000", errUsage, *weight)
	}
	path := fs.Arg(0)
	var text []byte
	var baseDir string
	var err error
	if path == "-" {
		text, err = io.ReadAll(os.Stdin)
		if err == nil {
			baseDir, err = os.Getwd()
		}
	} else {
		text, err = os.ReadFile(path)
		if err == nil {
			baseDir, err = filepath.Abs(filepath.Dir(path))
		}
	}
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(text)) == 0 {
		name := path
		if path == "-" {
			name = "standard input"
		}
		return fmt.Errorf("%s is empty: want a job spec (docs/pipeline.md)", name)
	}
	c := newAPIClient(*socket)
	raw, created, err := c.submit(ctx, submitRequest{Spec: string(text), WorldSize: *worldSize, Hosts: *hosts, Host: *host, BaseDir: baseDir, Weight: *weight, File: specFile(path)})
	if err != nil {
		return specErrors(path, err)
	}
	if *asJSON {
		return writeJSON(stdout, raw)
	}
	var job apiJob
	if err := json.Unmarshal(raw, &job); err != nil {
		return fmt.Errorf("decode job: %w", err)
	}
	verb := "joined"
	if created {
		verb = "created"
	}
	_, err = fmt.Fprintf(stdout, "%s job %s %q: world size %d, weight %d, %s\n", verb, job.ID, job.Name, job.WorldSize, job.Weight, job.State)
	return err
}

// specErrors turns a 400 answer with field errors into one line per problem,
// "SPEC:LINE: field: message", as compilers print them.
func specErrors(path string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || len(ae.Fields) == 0 {
		return err
	}
	name := path
	if name == "-" {
		name = "<stdin>"
	}
	var b strings.Builder
	if len(ae.Fields) > 1 {
		// One error is its own line: the message would say it twice.
		fmt.Fprintf(&b, "%s: %s\n", name, ae.Message)
	}
	for i, f := range ae.Fields {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(name)
		if f.Line > 0 {
			fmt.Fprintf(&b, ":%d", f.Line)
		}
		b.WriteString(": ")
		if f.Field != "" {
			b.WriteString(f.Field + ": ")
		}
		b.WriteString(f.Msg)
	}
	return errors.New(b.String())
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
