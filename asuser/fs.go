package asuser

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FS reads the file system as Cred: every path is resolved and every
// permission checked by the kernel against the user's credentials. Its
// methods match decode.LocalFS (decode.Local makes it a decode.FS).
type FS struct {
	Cred Cred
}

// ErrNotRegular is returned by Open for anything but a regular file: a
// FIFO or a device could block the daemon or read without end.
var ErrNotRegular = fmt.Errorf("not a regular file")

// ErrRelative is returned for a name that is not an absolute path. The
// daemon's working directory is no user's: a path resolved from there is
// searched from that directory down, past the directories above it that
// the user may not search.
var ErrRelative = errors.New("relative path: lastmiled resolves no path against its own working directory (use an absolute path, or send base_dir)")

func absolute(op, name string) error {
	if filepath.IsAbs(name) {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: ErrRelative}
}

// Open opens name for reading as the user. Only regular files are
// returned. The open itself does not block on FIFOs (O_NONBLOCK), and the
// file's type is checked on the open descriptor, not on the path.
func (f FS) Open(name string) (*os.File, error) {
	if err := absolute("open", name); err != nil {
		return nil, err
	}
	var file *os.File
	err := f.Cred.Do(func() error {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: name, Err: err}
		}
		file = os.NewFile(uintptr(fd), name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode()))}
	}
	return file, nil
}

// Stat returns name's file info, following symlinks, as the user.
func (f FS) Stat(name string) (fs.FileInfo, error) {
	if err := absolute("stat", name); err != nil {
		return nil, err
	}
	var fi fs.FileInfo
	err := f.Cred.Do(func() (err error) {
		fi, err = os.Stat(name)
		return err
	})
	return fi, err
}

// ReadDir lists the directory name, sorted by file name, as the user (who
// needs read and search permission on it).
func (f FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := absolute("readdir", name); err != nil {
		return nil, err
	}
	var ents []fs.DirEntry
	err := f.Cred.Do(func() (err error) {
		ents, err = os.ReadDir(name)
		return err
	})
	return ents, err
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
