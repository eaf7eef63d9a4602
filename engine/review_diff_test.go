package engine_test

import (
	"errors"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

// TestReviewDiffInputErrorPrefixInput: inputError attributes planning's
// error to the first input whose text is a substring of the message. An
// input that is a prefix of the failing one ("DATA" and "DATAx") takes the
// error: the FieldError points at the wrong line and field.
func TestReviewDiffInputErrorPrefixInput(t *testing.T) {
	err := checkSpec(t, "inputs:\n  - DATA\n  - DATAx\nbatch: {size: 64}\n")
	var fe *spec.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%v: not a FieldError", err)
	}
	if fe.Field != "inputs[1]" || fe.Line != 3 {
		t.Fatalf("%s: field %q line %d, want inputs[1] at line 3 (the input that does not exist)", err, fe.Field, fe.Line)
	}
}
