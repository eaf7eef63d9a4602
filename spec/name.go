package spec

import (
	"fmt"
	"strings"
)

const (
	// MaxNameLen is the longest job name, in bytes.
	MaxNameLen = 128
	// MaxRingNameLen is the longest ring.name, in bytes: room for the
	// default "lastmile." prefix before a job name, and with a rank suffix
	// (".r4095") still within the ring format's 200.
	MaxRingNameLen = 160
	// NameRule says what a job name may be, for error messages.
	NameRule = "1 to 128 characters of letters, digits, '.', '_' and '-', starting with a letter or digit"
	// RingNameRule says what a ring name may be.
	RingNameRule = "1 to 160 characters of letters, digits, '.', '_' and '-', starting with a letter or digit"
)

// ValidName checks a job name. Job names key the daemon's jobs and become
// ring file names (lastmile.NAME.rR in the shm directory), so they must
// never hold a '/' or a NUL, nor be "." or "..", and are bounded in length.
// It is the rule that Parse applies to name.
func ValidName(s string) error {
	return checkName(s, nameRE.MatchString(s), MaxNameLen, NameRule)
}

// ValidRingName checks a ring.name as Parse does.
func ValidRingName(s string) error {
	return checkName(s, ringRE.MatchString(s), MaxRingNameLen, RingNameRule)
}

func checkName(s string, ok bool, max int, rule string) error {
	switch {
	case ok:
		return nil
	case s == "":
		return fmt.Errorf("empty: want %s", rule)
	case len(s) > max:
		return fmt.Errorf("%d bytes long: want %s", len(s), rule)
	case strings.ContainsAny(s, "/\x00"):
		return fmt.Errorf("%q holds a '/' or a NUL: want %s", s, rule)
	}
	return fmt.Errorf("%q: want %s", s, rule)
}
