package engine_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"

	"github.com/lastmile/lastmile/engine"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// TestInputErrorLongestInput: inputError attributes planning's
// error to the first input whose text is a substring of the message. An
// input that is a prefix of the failing one ("DATA" and "DATAx") takes the
// error: the FieldError points at the wrong line and field.
func TestInputErrorLongestInput(t *testing.T) {
	err := checkSpec(t, "inputs:\n  - DATA\n  - DATAx\nbatch: {size: 64}\n")
	var fe *spec.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%v: not a FieldError", err)
	}
	if fe.Field != "inputs[1]" || fe.Line != 3 {
		t.Fatalf("%s: field %q line %d, want inputs[1] at line 3 (the input that does not exist)", err, fe.Field, fe.Line)
	}
}

// TestNoBatchQuietOnResumeAtEnd: a run resumed at the end of
// its last epoch (cursor (0, n), n the batches per epoch: the end of epoch 0,
// which the Python Dataset keeps as such) gives no batch because every batch
// was already read, not because the epoch is smaller than a step. It warns
// "gave no batch ... lower batch.size" all the same.
func TestNoBatchQuietOnResumeAtEnd(t *testing.T) {
	var logs bytes.Buffer
	src := `
inputs: [DATA]
columns: [row_id]
batch: {size: 2500, last: drop}
epochs: 1
ring: {dir: RINGDIR, name: t, slots: 3}
`
	st, _, err := runJobWith(t, src, func(o *engine.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		o.Resume = []engine.Cursor{{Epoch: 0, Batch: 4}} // 10,000 rows / 2,500: the end of epoch 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "gave no batch") {
		t.Fatalf("%d batches, %d epochs; warned though the epoch has 4 batches per rank:\n%s", st.Batches, st.Epochs, logs.String())
	}
}
