package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/engine"
)

// An attach's cursor is the trainer's word: a batch so far past any epoch
// that the rows before it overflow is refused with a 400, not handed to a
// restart that would resume the ring at another place.
func TestAttachCursorPastAnyEpoch(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: cur\ninputs: [" + abs + "]\ncolumns: [row_id]\nbatch: {size: 100}\nworld_size: 2\nepochs: 0\nring: {slots: 4}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.cancel("test over")
	rank, wait := 1, 5.0
	_, err = j.attach(context.Background(), attachRequest{Rank: &rank, Cursor: &engine.Cursor{Epoch: 3, Batch: 1 << 62}, Wait: &wait})
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || !strings.Contains(ae.msg, "past any epoch") {
		t.Fatalf("attach with batch 2^62: %v, want a 400 saying the cursor is past any epoch", err)
	}
	j.mu.Lock()
	st := j.state
	j.mu.Unlock()
	if st.Terminal() {
		t.Errorf("the job is %s after the refused attach", st)
	}
}
