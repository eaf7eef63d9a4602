package decode

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrMissingColumn: a projected column is not in a file's schema.
	ErrMissingColumn = errors.New("no such column")
	// ErrUnsupported: a column's type or encoding is outside what lastmile
	// decodes (see docs/decode.md).
	ErrUnsupported = errors.New("unsupported")
	// ErrSchemaMismatch: the planned files disagree on a projected column.
	ErrSchemaMismatch = errors.New("schema mismatch")
	// ErrFileChanged: a unit's file no longer has the size or modification
	// time recorded when it was planned. Plan again.
	ErrFileChanged = errors.New("file changed since it was planned")
	// ErrCorrupt: the file's bytes do not form valid Parquet.
	ErrCorrupt = errors.New("corrupt parquet")
	// ErrBadUnit: a unit does not match its file's own footer (a decoder
	// told to VerifyUnits, as a CPU peer's are, checks).
	ErrBadUnit = errors.New("unit does not match its file")
)

// Error is the error of a failed decode: it names the file and, where
// known, the row group, column and page offset. Err wraps ErrCorrupt for
// bad bytes, ErrFileChanged, I/O errors, or the context's error.
type Error struct {
	File       string
	RowGroup   int    // -1 when not known
	Column     string // "" when not known
	PageOffset int64  // file offset of the page header, -1 when not known
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("decode ")
	b.WriteString(e.File)
	if e.RowGroup >= 0 {
		fmt.Fprintf(&b, " row group %d", e.RowGroup)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, " column %q", e.Column)
	}
	if e.PageOffset >= 0 {
		fmt.Fprintf(&b, " page at offset %d", e.PageOffset)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// corrupt wraps a parse failure so that errors.Is(err, ErrCorrupt) holds.
func corrupt(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
