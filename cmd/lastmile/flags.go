package main

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
)

// printFlags is flag.PrintDefaults without the hidden flags (old spellings
// kept working, internal flags), and without printing a default twice: a
// usage that spells out its default itself ("(default ...)") gets no
// second one from the flag package.
func printFlags(fs *flag.FlagSet, hidden ...string) {
	skip := map[string]bool{}
	for _, h := range hidden {
		skip[h] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if skip[f.Name] {
			return
		}
		fmt.Fprint(fs.Output(), flagHelp(f))
	})
}

// flagHelp formats one flag as flag.PrintDefaults does.
func flagHelp(f *flag.Flag) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  -%s", f.Name)
	name, usage := flag.UnquoteUsage(f)
	if len(name) > 0 {
		b.WriteString(" " + name)
	}
	if b.Len() <= 4 { // space, dash, one letter: the usage fits on the line
		b.WriteString("\t")
	} else {
		b.WriteString("\n    \t")
	}
	b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
	if !strings.Contains(usage, "(default") && !isZeroValue(f) {
		if reflect.TypeOf(f.Value).String() == "*flag.stringValue" { // flag quotes strings
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		} else {
			fmt.Fprintf(&b, " (default %v)", f.DefValue)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// isZeroValue reports whether f's default is its type's zero value, which
// flag.PrintDefaults does not print.
func isZeroValue(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return false
	}
	return f.DefValue == v.String()
}

// shmDirFlag adds -shm-dir, the ring directory, named as lastmiled's flag
// and config key (shm_dir) are; -dir, its old name here, stays as a hidden
// alias.
func shmDirFlag(fs *flag.FlagSet) *string {
	dir := new(string)
	fs.StringVar(dir, "shm-dir", "", "ring directory (default $LASTMILE_SHM_DIR or /dev/shm)")
	fs.StringVar(dir, "dir", "", "")
	return dir
}

// errFlagSaid marks a flag error the flag package has printed already,
// with the command's usage: it is not printed again.
var errFlagSaid = errors.New("flag error, printed")

// parseArgs parses args into fs, taking flags before, between and after the
// positional arguments (lastmile run job.yaml -v), which fs.Parse alone does
// not: it stops at the first non-flag. A "--" ends the flags; everything
// after it is positional, however it is spelled. When it returns nil,
// fs.Args() holds the positional arguments in order.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errFlagSaid, err)
		}
		rest := fs.Args()
		if endedByDashDash(fs, args, rest) {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	// Leave exactly the positionals in fs.Args(): a leading "--" keeps any
	// of them that start with '-' from being read as flags again.
	return fs.Parse(append([]string{"--"}, pos...))
}

// endedByDashDash reports whether fs.Parse(args), which left rest, stopped
// at a "--" rather than at a positional argument: the last argument it
// consumed is "--", and not as the value of a flag (-name --).
func endedByDashDash(fs *flag.FlagSet, args, rest []string) bool {
	n := len(args) - len(rest)
	if n < 1 || args[n-1] != "--" {
		return false
	}
	return n < 2 || !takesValue(fs, args[n-2])
}

// takesValue reports whether arg is a flag of fs (-name or --name, without
// "=value") that takes the next argument as its value.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}
