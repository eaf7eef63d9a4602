package daemon

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/lastmile/lastmile/spec"
)

// Names that become file names. Every job id, job name and ring name the
// daemon turns into a path is checked here or by spec.Parse first:
//
//   - job ids name the state store's files (STATE_DIR/jobs/ID.json): 12
//     lowercase hex digits, made by newID, checked again by the store;
//   - job and ring names (spec name, ring.name) become ring files in the
//     shm directory: spec.ValidName and spec.ValidRingName (no '/', no NUL,
//     no "." or "..", bounded length), and shm checks ring names again;
//   - {id} in a URL path is only compared with ids and names, never joined
//     to a path, but anything that could not be one is refused with 400.

// idLen is the length of a job id in hex digits.
const idLen = 12

// validID checks a job id: exactly idLen lowercase hex digits.
func validID(id string) error {
	if len(id) != idLen {
		return fmt.Errorf("job id %s: want %d lowercase hex digits", strconv.QuoteToASCII(clip(id)), idLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("job id %s: want %d lowercase hex digits", strconv.QuoteToASCII(id), idLen)
		}
	}
	return nil
}

// checkJobKey checks the {id} of a URL path: a job id or a job name.
func checkJobKey(key string) error {
	if validID(key) == nil || spec.ValidName(key) == nil {
		return nil
	}
	return errorf(http.StatusBadRequest, "path {id} %s: want a job id (%d lowercase hex digits) or a job name (%s)",
		strconv.QuoteToASCII(clip(key)), idLen, spec.NameRule)
}

// clip shortens what an error quotes back to the caller.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
