package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/lastmile/lastmile/engine"
	"github.com/parquet-go/parquet-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSpillPartitionsByteIdentical: a table partitioned in directories,
// Hive style, gives the same batches with every unit spilled as run
// here. The peer plans each unit's file alone, by its name under its
// root, and fills the partition columns from the values the unit
// carries.
func TestSpillPartitionsByteIdentical(t *testing.T) {
	f := newFixture(t)
	type row struct {
		RowID int64 `parquet:"row_id"`
		Clk   int64 `parquet:"clk"`
	}
	var inputs []string
	for d, dt := range []string{"2026-11-01", "2026-11-02", "2026-11-03"} {
		for h := range 2 {
			dir := filepath.Join(f.data, "events", "dt="+dt, fmt.Sprintf("hour=%d", h))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rows := make([]row, 900)
			for i := range rows {
				rows[i] = row{RowID: int64(d*10000 + h*1000 + i), Clk: int64(i % 3)}
			}
			if err := parquet.WriteFile(filepath.Join(dir, "part-0.parquet"), rows, parquet.MaxRowsPerRowGroup(400)); err != nil {
				t.Fatal(err)
			}
		}
	}
	inputs = append(inputs, filepath.Join(f.data, "events"))
	text := fmt.Sprintf(`version: 1
name: hive
inputs: [%s]
partitions: {dt: string, hour: int64}
batch: {size: 100, last: drop}
epochs: 1
seed: 5
shuffle: {units: true, buffer: 300}
ring: {slots: 4, dir: %s}
decode: {workers: 1}
pipeline:
  - filter: 'dt >= "2026-11-02" and clk != 1'
  - map: {slot: "hour * 10 + clk"}
  - select: [row_id, dt, hour, slot]
`, inputs[0], f.shm)
	job, _, addr := f.localThenSpilled("hive", text)

	// A unit whose partition values its file's path does not give is
	// refused as a bad ticket, as one whose chunks are not its file's.
	portable, err := portableJob(f.roots, text, job)
	if err != nil {
		t.Fatal(err)
	}
	up, err := engine.NewUnitProcessor(context.Background(), job, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	unit := up.Units()[0]
	up.Close()
	client := f.flightClient(addr)
	for _, c := range []struct {
		name      string
		partition []string
		code      codes.Code
	}{
		{"as planned", unit.Partition, codes.OK},
		{"another date", []string{"2026-12-25", unit.Partition[1]}, codes.InvalidArgument},
		{"one value short", unit.Partition[:1], codes.InvalidArgument},
	} {
		tk := Ticket{Version: Version, Job: portable, Hash: jobHash([]byte(portable)), Unit: unit, User: &User{}, Compute: Compute()}
		tk.Unit.File, _ = f.roots.Locate(unit.File)
		tk.Unit.Partition = c.partition
		b, _ := json.Marshal(tk)
		stream, err := client.DoGet(context.Background(), &flight.Ticket{Ticket: b})
		for err == nil {
			_, err = stream.Recv()
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
	}
}
