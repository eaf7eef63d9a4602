// Package roots owns named data roots: a host maps each name ("ctr") to a
// directory of its own (an NFS mount, a FUSE mount of object storage, or
// the same local path in tests), and a file is named portably as a root
// and a path relative to it ("ctr/day=1/part-0.parquet"). A CPU peer
// reads a unit's file through its own mapping of the root.
//
// Files are opened only beneath their root, and the kernel enforces it:
// openat2 with RESOLVE_BENEATH resolves the path from the root's directory
// descriptor and fails with EXDEV for any ".." that would climb above it,
// any absolute path, and any symbolic link (at any component) whose
// target leaves the root; RESOLVE_NO_MAGICLINKS refuses /proc-style links.
// Nothing is checked by string matching alone, so a symlink swapped in
// after a check cannot defeat it. Names are validated as text too, so that
// errors are clear before any system call.
//
// A root may also be an object-store prefix ("ctr: s3://bucket/ctr"), so
// that a peer reads the same objects as the GPU host. Such a root has no
// directory: URL turns a name beneath it into the object's URL (the same
// text checks refuse '..' and absolute paths; an object store has no
// symlinks), Locate maps an object's URL back to its portable name, and
// Open, Stat and ReadDir refuse it (ErrObjectRoot): the caller reads the
// URL through its object store.
//
// The package must never import another package of lastmile's.
package roots

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOutside is returned for a path that leaves its root.
var ErrOutside = errors.New("path leaves its data root")

// ErrUnknownRoot is returned for a root name the host does not map.
var ErrUnknownRoot = errors.New("unknown data root")

// ErrObjectRoot is returned by Open, Stat and ReadDir for a name beneath
// an object-store root: read URL(name) through the object store instead.
var ErrObjectRoot = errors.New("data root is an object-store prefix")

// Roots is a host's mapping of root names to directories. It is safe for
// concurrent use; Close releases the directory descriptors.
type Roots struct {
	dirs  map[string]string // name -> absolute, cleaned directory
	urls  map[string]string // name -> object-store prefix, ending in '/'
	fds   map[string]int    // name -> O_PATH descriptor of the directory
	names []string          // sorted, for errors and Locate
}

// New opens the roots of m (name -> directory or object-store prefix).
// Names are 1 to 64 bytes of [A-Za-z0-9._-], not starting with '.';
// directories must be absolute and exist; prefixes are "SCHEME://..." with
// no '.' or '..' segment.
func New(m map[string]string) (*Roots, error) {
	r := &Roots{dirs: map[string]string{}, fds: map[string]int{}, urls: map[string]string{}}
	for name, dir := range m {
		if err := ValidName(name); err != nil {
			r.Close()
			return nil, err
		}
		if scheme, rest, ok := strings.Cut(dir, "://"); ok {
			if err := checkURLRoot(scheme, rest); err != nil {
				r.Close()
				return nil, fmt.Errorf("data root %q: %q: %w", name, dir, err)
			}
			r.urls[name] = strings.TrimSuffix(dir, "/") + "/"
			r.names = append(r.names, name)
			continue
		}
		if !filepath.IsAbs(dir) {
			r.Close()
			return nil, fmt.Errorf("data root %q: directory %q is not absolute", name, dir)
		}
		dir = filepath.Clean(dir)
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("data root %q: open %s: %w", name, dir, err)
		}
		r.dirs[name], r.fds[name] = dir, fd
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	return r, nil
}

func checkURLRoot(scheme, rest string) error {
	if scheme == "" || strings.ContainsAny(scheme, "/.") {
		return errors.New("want SCHEME://bucket/prefix")
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return errors.New("no bucket")
	}
	if prefix == "" {
		return nil
	}
	return checkRel(strings.TrimSuffix(prefix, "/"))
}

// Close releases the roots' directory descriptors.
func (r *Roots) Close() error {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
	return nil
}

// Names returns the root names, sorted.
func (r *Roots) Names() []string { return append([]string(nil), r.names...) }

// Dir returns the directory root name maps to on this host.
func (r *Roots) Dir(name string) (string, bool) { d, ok := r.dirs[name]; return d, ok }

// URL returns the object URL of the portable name "ROOT/REL" when ROOT is
// an object-store root; ok is false for a directory root.
func (r *Roots) URL(name string) (url string, ok bool, err error) {
	root, rel, err := Split(name)
	if err != nil {
		return "", false, err
	}
	prefix, ok := r.urls[root]
	if !ok {
		if _, dir := r.dirs[root]; !dir {
			return "", false, fmt.Errorf("%w %q (this host has %s)", ErrUnknownRoot, root, strings.Join(r.names, ", "))
		}
		return "", false, nil
	}
	if rel = path.Clean(rel); rel == "." {
		return prefix, true, nil
	}
	return prefix + rel, true, nil
}

// ValidName checks a root name.
func ValidName(name string) error {
	switch {
	case name == "" || len(name) > 64:
		return fmt.Errorf("data root name %q: want 1 to 64 bytes", name)
	case name[0] == '.':
		return fmt.Errorf("data root name %q: must not start with '.'", name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("data root name %q: only letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}

// Split parses a portable name "ROOT/REL" (or "ROOT", the root's own
// directory) into the root and the relative path, refusing, before any
// system call, what cannot be beneath a root: an absolute relative path, a
// ".." component, a NUL.
func Split(name string) (root, rel string, err error) {
	if strings.HasPrefix(name, "/") {
		return "", "", fmt.Errorf("%q: %w: absolute path", name, ErrOutside)
	}
	root, rel, _ = strings.Cut(name, "/")
	if rel == "" {
		rel = "."
	}
	if err := ValidName(root); err != nil {
		return "", "", err
	}
	if err := checkRel(rel); err != nil {
		return "", "", fmt.Errorf("%q: %w", name, err)
	}
	return root, rel, nil
}

func checkRel(rel string) error {
	switch {
	case strings.HasPrefix(rel, "/"):
		return fmt.Errorf("%w: absolute path", ErrOutside)
	case strings.IndexByte(rel, 0) >= 0:
		return errors.New("path contains a NUL byte")
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return fmt.Errorf("%w: '..' component", ErrOutside)
		}
	}
	return nil
}

// Locate turns a local absolute path into its portable name, using the
// root whose directory holds it (the longest such). ok is false when no
// root holds the path: such a file cannot be read by a peer.
func (r *Roots) Locate(p string) (name string, ok bool) {
	if strings.Contains(p, "://") {
		best := ""
		for n, prefix := range r.urls {
			if strings.HasPrefix(p, prefix) && len(p) > len(prefix) && len(prefix) > len(r.urls[best]) {
				best = n
			}
		}
		if best == "" || checkRel(strings.TrimPrefix(p, r.urls[best])) != nil {
			return "", false
		}
		return best + "/" + strings.TrimPrefix(p, r.urls[best]), true
	}
	p = filepath.Clean(p)
	best := ""
	for n, dir := range r.dirs {
		if (p == dir || strings.HasPrefix(p, dir+"/")) && len(dir) > len(r.dirs[best]) {
			best = n
		}
	}
	if best == "" || p == r.dirs[best] {
		return "", false
	}
	return best + "/" + strings.TrimPrefix(p, r.dirs[best]+"/"), true
}

// resolve returns the directory descriptor and the relative path of name.
func (r *Roots) resolve(name string) (int, string, error) {
	root, rel, err := Split(name)
	if err != nil {
		return -1, "", err
	}
	fd, ok := r.fds[root]
	if _, obj := r.urls[root]; obj {
		return -1, "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s): read it through the object store", ErrObjectRoot, r.urls[root])}
	}
	if !ok {
		return -1, "", fmt.Errorf("%w %q (this host has %s)", ErrUnknownRoot, root, strings.Join(r.names, ", "))
	}
	return fd, path.Clean(rel), nil
}

// openBeneath opens rel beneath the directory dirfd with flags; a path
// that leaves it fails with ErrOutside.
func openBeneath(dirfd int, name, rel string, flags uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case (err == unix.EINTR || err == unix.EAGAIN) && try < 64:
			// EAGAIN: a rename elsewhere in the file system raced the
			// lookup, which the kernel then refuses to trust; look again.
			continue
		case err == unix.EXDEV:
			return -1, &fs.PathError{Op: "open", Path: name, Err: ErrOutside}
		case err != nil:
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return fd, nil
	}
}

// Open opens the regular file named "ROOT/REL" for reading, beneath its
// root. It matches decode.LocalFS's Open, with portable names as paths.
func (r *Roots) Open(name string) (*os.File, error) {
	dirfd, rel, err := r.resolve(name)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(dirfd, name, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a regular file")}
	}
	return f, nil
}

// Stat returns the info of "ROOT/REL", resolved beneath its root.
func (r *Roots) Stat(name string) (fs.FileInfo, error) {
	dirfd, rel, err := r.resolve(name)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(dirfd, name, rel, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return f.Stat()
}

// ReadDir lists the directory "ROOT/REL" (or "ROOT/." for the root),
// beneath its root, sorted by name. Use the entries' Name and Type: their
// Info would stat by the portable name, which is no local path.
func (r *Roots) ReadDir(name string) ([]fs.DirEntry, error) {
	dirfd, rel, err := r.resolve(name)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(dirfd, name, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, err
}
