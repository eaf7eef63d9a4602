package decode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FS is where a plan's files come from: planning lists directories,
// expands globs and reads footers through it, and every Decoder made from
// the plan (Plan.NewDecoder) opens the files through it. The daemon passes
// one that opens with the submitting user's credentials (package asuser,
// through Local), so that nothing of a file is read unless the kernel lets
// that user read it; object stores (s3://) come in through WithSchemes.
// A nil FS is OSFS. See source.go for File, Local and the optional
// interfaces (Lister, Prefetcher) a remote source adds.
type FS interface {
	// Open opens a regular file (or object) for reading.
	Open(name string) (File, error)
	// Stat returns a file's info, following symlinks.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
}

// MaxFiles bounds the files one directory input may expand to.
const MaxFiles = 1 << 20

// OSFS reads with the process's own credentials.
type OSFS struct{}

func (OSFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err // not a typed nil *os.File in the interface
	}
	return f, nil
}
func (OSFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

func orOS(fsys FS) FS {
	if fsys == nil {
		return OSFS{}
	}
	return fsys
}

// ExpandInputs is the list of files PlanFiles plans for inputs, read
// through fsys (nil: OSFS): for a caller that chooses among them first.
func ExpandInputs(ctx context.Context, fsys FS, inputs []string) ([]string, error) {
	return expandInputs(ctx, orOS(fsys), inputs)
}

// PlanInputs is the list of files PlanFiles plans for inputs with opts:
// inputs expanded (ExpandInputs, through opts.FS), or, when opts.Listed
// says they are files already listed, inputs as they are, duplicates
// dropped, with nothing listed or stated.
func PlanInputs(ctx context.Context, inputs []string, opts PlanOptions) ([]string, error) {
	if !opts.Listed {
		return expandInputs(ctx, orOS(opts.FS), inputs)
	}
	out := make([]string, 0, len(inputs))
	seen := make(map[string]bool, len(inputs))
	for _, p := range inputs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// expandInputs turns inputs (files, globs, directories searched recursively
// for *.parquet) into file paths, each input's matches sorted and
// duplicates dropped, listing and stating only through fsys.
func expandInputs(ctx context.Context, fsys FS, inputs []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(paths []string) {
		slices.Sort(paths)
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	for _, in := range inputs {
		if l, ok := fsys.(Lister); ok && l.Owns(in) {
			objs, err := expandObjects(ctx, l, in)
			if err != nil {
				return nil, err
			}
			add(objs)
			continue
		}
		if hasMeta(in) {
			m, err := glob(fsys, in)
			if err != nil {
				return nil, fmt.Errorf("plan: glob %q: %w", in, err)
			}
			// A matched directory is read as a directory input is:
			// "/data/events/dt=2026-11-2*".
			var files []string
			for _, p := range m {
				st, err := fsys.Stat(p)
				if errors.Is(err, fs.ErrPermission) {
					return nil, fmt.Errorf("plan: %w", err)
				}
				switch {
				case err != nil:
				case st.Mode().IsRegular():
					files = append(files, p)
				case st.IsDir():
					if err := walkParquet(ctx, fsys, p, &files); err != nil {
						return nil, fmt.Errorf("plan: walk %s: %w", p, err)
					}
				}
			}
			add(files)
			continue
		}
		st, err := fsys.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		if !st.IsDir() {
			add([]string{in})
			continue
		}
		var files []string
		if err := walkParquet(ctx, fsys, in, &files); err != nil {
			return nil, fmt.Errorf("plan: walk %s: %w", in, err)
		}
		add(files)
	}
	return out, nil
}

// walkParquet appends the regular *.parquet files under dir, recursively,
// not following symlinks (as filepath.WalkDir). It stops when ctx is done
// (a directory input may be a whole file system) and at MaxFiles files.
func walkParquet(ctx context.Context, fsys FS, dir string, files *[]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if err := walkParquet(ctx, fsys, p, files); err != nil {
				return err
			}
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".parquet"):
			if len(*files) >= MaxFiles {
				return fmt.Errorf("more than %d parquet files under %s: name fewer directories, or a glob", MaxFiles, dir)
			}
			*files = append(*files, p)
		}
	}
	return nil
}

// glob is filepath.Glob through fsys: the matches of pattern, in lexical
// order. Missing directories match nothing, as in filepath.Glob; a
// malformed pattern is an error, and so, unlike filepath.Glob, is a
// directory that fsys may not list: a user is told why nothing matched.
func glob(fsys FS, pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	if !hasMeta(pattern) {
		if _, err := fsys.Stat(pattern); err != nil {
			return nil, permissionOnly(err)
		}
		return []string{pattern}, nil
	}
	dir, file := filepath.Split(pattern)
	dir = cleanGlobDir(dir)
	if !hasMeta(dir) {
		return globDir(fsys, dir, file, nil)
	}
	if dir == pattern { // a pattern like "[" that Split cannot shorten
		return nil, filepath.ErrBadPattern
	}
	dirs, err := glob(fsys, dir)
	if err != nil {
		return nil, err
	}
	var m []string
	for _, d := range dirs {
		if m, err = globDir(fsys, d, file, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// permissionOnly passes on permission errors and drops the others.
func permissionOnly(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}

func cleanGlobDir(dir string) string {
	switch dir {
	case "":
		return "."
	case "/":
		return dir
	}
	return dir[:len(dir)-1] // drop the trailing separator
}

// globDir appends the names in dir matching pattern to m.
func globDir(fsys FS, dir, pattern string, m []string) ([]string, error) {
	st, err := fsys.Stat(dir)
	if err != nil || !st.IsDir() {
		return m, permissionOnly(err)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return m, permissionOnly(err)
	}
	for _, e := range ents {
		ok, err := filepath.Match(pattern, e.Name())
		if err != nil {
			return m, err
		}
		if ok {
			m = append(m, filepath.Join(dir, e.Name()))
		}
	}
	return m, nil
}
