package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusJobFullError: `lastmile status JOB` is the one view an
// operator reads a failed job's error in, yet printJob passes it through
// oneLine, which cuts it at 120 bytes. The daemon's errors end with what
// was wrong and what to do ("... the file is damaged", "... stop it, or
// choose another ring name"), which is the part cut off. Seen against a
// running daemon: "error  epoch 0: decode .../badpage.parquet row group 0
// column "seq_0" page at offset 21054: corrupt parquet: page C...". The
// table of `lastmile jobs` may shorten; the detail view should not (nor the
// record-behind WARNING, whose tail is the path and errno).
func TestStatusJobFullError(t *testing.T) {
	msg := `epoch 0: decode /data/ctr/part-00017.parquet row group 0 column "seq_0" page at offset 21054: corrupt parquet: page CRC ee69a533, but its 2311 bytes hash to aa4e7d72: the file is damaged`
	var out bytes.Buffer
	if err := printJob(&out, &apiJob{ID: "b4bbcdeecdec", Name: "bad", State: "failed", Error: msg}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the file is damaged") {
		t.Errorf("lastmile status JOB shows the error cut short:\n%s", out.String())
	}
}
