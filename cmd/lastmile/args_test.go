package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestFlagsAfterArgs: every subcommand takes its flags after its
// positional arguments too (README: lastmile run job.yaml ... -v). An
// unknown flag placed last is reported as a flag, before the command does
// anything, rather than taken as one more argument (commands that take none
// get a stray one, so that the flag after it is what is checked).
func TestFlagsAfterArgs(t *testing.T) {
	positionals := map[string][]string{
		"gen":    {"/nonexistent/out"},
		"run":    {"job.yaml"},
		"cat":    {"lastmile.job.r0"},
		"demo":   {"stray"},
		"bench":  nil, // bench with an argument and no error would run the benchmarks
		"schema": {"job.yaml"},
		"plan":   {"job.yaml"},
		"submit": {"job.yaml"},
		"jobs":   {"stray"},
		"status": {"job1"},
		"cancel": {"job1", "job2"},
		"top":    {"stray"},
		"gpus":   {"stray"},
		"gpu":    {"check"},
		"certs":  {"ca"},
	}
	for _, c := range commands() {
		if c.name == "version" {
			continue
		}
		pos, ok := positionals[c.name]
		if !ok {
			t.Errorf("lastmile %s: no case here; add one", c.name)
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{c.name}, pos...), "-no-such-flag")
			var out, errb bytes.Buffer
			code := run(context.Background(), args, &out, &errb)
			// Reported once (with the usage), exit 2 as for other usage errors.
			if code != 2 || strings.Count(errb.String(), "flag provided but not defined: -no-such-flag") != 1 {
				t.Errorf("lastmile %s: exit %d, want 2 and the unknown flag reported once:\n%s", strings.Join(args, " "), code, errb.String())
			}
		})
	}
}

// TestFlagsAfterArgsParsed: flags after or between the arguments take
// effect, and the arguments are what is left, in order; README.md's own
// lines and the finding's (run job.yaml -v, submit job.yaml -world-size 2,
// schema job.yaml -json).
func TestFlagsAfterArgsParsed(t *testing.T) {
	o, err := parseRunFlags([]string{"job.yaml", "-v", "-keep"}, io.Discard)
	if err != nil || !o.verbose || !o.keep || o.specPath != "job.yaml" {
		t.Errorf("run job.yaml -v -keep: %+v, %v", o, err)
	}
	c, err := parseCatFlags([]string{"ring", "-n", "3", "-shm-dir", "/x"}, io.Discard)
	if err != nil || c.ring != "ring" || c.max != 3 || c.dir != "/x" {
		t.Errorf("cat ring -n 3 -shm-dir /x: %+v, %v", c, err)
	}
	g, err := parseGenFlags([]string{"out", "-rows", "1000"}, io.Discard)
	if err != nil || g.cfg.Rows != 1000 || !reflect.DeepEqual(g.args, []string{"out"}) {
		t.Errorf("gen out -rows 1000: %+v, %v", g, err)
	}
	if _, path, err := parsePlanFlags([]string{"job.yaml", "-shm-dir", "/x"}, io.Discard); err != nil || path != "job.yaml" {
		t.Errorf("plan job.yaml -shm-dir /x: %q, %v", path, err)
	}
	// submit and schema reach no daemon and no file when -h follows.
	for _, args := range [][]string{
		{"submit", "job.yaml", "-world-size", "2", "-h"},
		{"schema", "job.yaml", "-json", "-h"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-json") {
			t.Errorf("lastmile %s: exit %d, want 0 and the help:\n%s", strings.Join(args, " "), code, errb.String())
		}
	}
}

// TestParseArgs: parseArgs takes flags anywhere among the arguments;
// "--" ends the flags, but not as a flag's value; "-" (standard input) is
// an argument.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantArgs []string
		wantV    bool
		wantO    string
	}{
		{args: nil, wantArgs: []string{}},
		{args: []string{"a"}, wantArgs: []string{"a"}},
		{args: []string{"-v", "a"}, wantArgs: []string{"a"}, wantV: true},
		{args: []string{"a", "-v"}, wantArgs: []string{"a"}, wantV: true},
		{args: []string{"a", "-o", "x", "b", "-v", "c"}, wantArgs: []string{"a", "b", "c"}, wantV: true, wantO: "x"},
		{args: []string{"a", "--o=x", "b"}, wantArgs: []string{"a", "b"}, wantO: "x"},
		{args: []string{"-", "-v"}, wantArgs: []string{"-"}, wantV: true},
		{args: []string{"a", "--", "-v", "b"}, wantArgs: []string{"a", "-v", "b"}},
		{args: []string{"--", "-v"}, wantArgs: []string{"-v"}},
		{args: []string{"a", "--", "--", "b"}, wantArgs: []string{"a", "--", "b"}},
		{args: []string{"a", "-o", "--", "-v"}, wantArgs: []string{"a"}, wantV: true, wantO: "--"},
		{args: []string{"a", "-v", "--", "-o"}, wantArgs: []string{"a", "-o"}, wantV: true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v := fs.Bool("v", false, "")
		o := fs.String("o", "", "")
		if err := parseArgs(fs, tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if got := fs.Args(); !reflect.DeepEqual(got, tc.wantArgs) || *v != tc.wantV || *o != tc.wantO {
			t.Errorf("%q: args %q -v %v -o %q, want %q %v %q", tc.args, got, *v, *o, tc.wantArgs, tc.wantV, tc.wantO)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseArgs(fs, []string{"a", "-x"}); err == nil || !strings.Contains(err.Error(), "-x") {
		t.Errorf("a -x: %v, want the unknown flag", err)
	}
}
