package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDoneJobViewEpoch: a job that produced both of its epochs reports, once
// done, the last epoch it produced. progress.epoch is "the epoch being
// produced" (docs/control-api.md) and `lastmile jobs` prints it as EPOCH
// e/N; view() reads it only from a live run, so every done job said epoch
// 0 ("EPOCH 0/2", "produced epoch 0: 20.0k rows, 40 batches").
func TestDoneJobViewEpoch(t *testing.T) {
	d := apiDaemon(t, nil)
	abs, _ := filepath.Abs("../testdata/small")
	p := peer{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), ok: true}
	j, _, err := d.submit(context.Background(), p, submitRequest{Spec: "name: ep\ninputs: [" + abs + "]\ncolumns: [row_id]\nepochs: 2\nbatch: {size: 1000}\nring: {slots: 32}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, j, 60*time.Second, Done, Failed, Canceled); st != Done {
		t.Fatalf("job ended %s", st)
	}
	<-j.finishedCh() // its record written: the test's directory may go
	v := j.view()
	if v.Progress.Batches != 20 {
		t.Fatalf("produced %d batches, want 20", v.Progress.Batches)
	}
	if v.Progress.Epoch != 1 {
		t.Errorf("done job of 2 epochs reports progress.epoch %d, want 1 (the last produced)", v.Progress.Epoch)
	}
}
