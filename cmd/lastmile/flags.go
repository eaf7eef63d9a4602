package main

import (
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
