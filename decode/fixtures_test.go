package decode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/datagen"
	"github.com/parquet-go/parquet-go"
)

const fixtures = "../testdata"

// fixtureConfig reads the datagen.Config a fixture carries in its metadata.
func fixtureConfig(t testing.TB, path string) datagen.Config {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := pf.Lookup(datagen.MetadataKey)
	if !ok {
		t.Fatalf("%s: no %s metadata", path, datagen.MetadataKey)
	}
	cfg, err := datagen.ConfigFromMetadata(v)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkRow compares row i of b with datagen's expected row.
func checkRow(b *column.Batch, i int, want *datagen.Row) error {
	for ci := range b.Columns {
		c := &b.Columns[ci]
		valid := c.Valid == nil || c.Valid[i] == 1
		var ok bool
		name := c.Name
		switch {
		case name == "row_id":
			ok = c.Int64s()[i] == want.RowID
		case name == "user_id":
			ok = c.Int64s()[i] == want.UserID
		case name == "item_id":
			ok = c.Int64s()[i] == want.ItemID
		case name == "label":
			ok = c.Int32s()[i] == want.Label
		case name == "query":
			ok = string(c.Row(i)) == want.Query
		case name == "dense_opt":
			ok = valid == want.DenseOptValid && c.Float32s()[i] == want.DenseOpt
		case name == "cat_opt":
			ok = valid == want.CatOptValid && c.Int64s()[i] == want.CatOpt
		case name == "seq_opt":
			ok = valid == want.SeqOptValid && slices.Equal(c.Int64s()[c.Offsets[i]:c.Offsets[i+1]], want.SeqOpt)
		case name == "query_opt":
			ok = valid == want.QueryOptValid && string(c.Row(i)) == want.QueryOpt
		case strings.HasPrefix(name, "dense_"):
			var j int
			fmt.Sscanf(name, "dense_%d", &j)
			ok = c.Float32s()[i] == want.Dense[j]
		case strings.HasPrefix(name, "cat_"):
			var j int
			fmt.Sscanf(name, "cat_%d", &j)
			ok = c.Int64s()[i] == want.Cats[j]
		case strings.HasPrefix(name, "seq_"):
			var j int
			fmt.Sscanf(name, "seq_%d", &j)
			ok = slices.Equal(c.Int64s()[c.Offsets[i]:c.Offsets[i+1]], want.Seqs[j])
		default:
			return fmt.Errorf("unexpected column %q", name)
		}
		if !ok {
			return fmt.Errorf("row %d column %q differs from datagen.Expected", want.RowID, name)
		}
	}
	return nil
}

func TestFixtures(t *testing.T) {
	for _, name := range []string{"small", "zstd", "none"} {
		for _, maxRows := range []int64{0, 700} {
			if maxRows > 0 && (testing.Short() || raceEnabled) {
				continue
			}
			t.Run(fmt.Sprintf("%s/max%d", name, maxRows), func(t *testing.T) {
				dir := filepath.Join(fixtures, name)
				plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{MaxUnitRows: maxRows})
				if err != nil {
					t.Fatal(err)
				}
				g := datagen.NewGenerator(fixtureConfig(t, plan.Files[0].Path))
				d := NewDecoder(plan.Fields)
				defer d.Close()
				var b column.Batch
				var want datagen.Row
				var rows int64
				for _, u := range plan.Units {
					if err := d.Decode(context.Background(), u, &b); err != nil {
						t.Fatal(err)
					}
					if err := b.Check(); err != nil {
						t.Fatal(err)
					}
					ids := b.Col("row_id").Int64s()
					for i := range b.Rows {
						if ids[i] != u.Ordinal+int64(i) {
							t.Fatalf("unit %d row %d has row_id %d, want %d", u.Seq, i, ids[i], u.Ordinal+int64(i))
						}
						g.Fill(ids[i], &want)
						if err := checkRow(&b, i, &want); err != nil {
							t.Fatal(err)
						}
					}
					rows += int64(b.Rows)
				}
				if rows != int64(g.Config().Rows) {
					t.Fatalf("decoded %d rows, fixture has %d", rows, g.Config().Rows)
				}
				comparePaths(t, plan)
			})
		}
	}
}

func TestFixtureEmpty(t *testing.T) {
	plan, err := PlanFiles(context.Background(), []string{filepath.Join(fixtures, "empty")}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Units) != 0 || plan.Rows != 0 || len(plan.Files) != 1 {
		t.Fatalf("empty fixture: %d units, %d rows, %d files", len(plan.Units), plan.Rows, len(plan.Files))
	}
}

func TestFixturesCorrupt(t *testing.T) {
	for _, name := range []string{"truncated", "garbage"} {
		path := filepath.Join(fixtures, "corrupt", name+".parquet")
		_, err := PlanFiles(context.Background(), []string{path}, PlanOptions{})
		var e *Error
		if !errors.As(err, &e) || e.File != path || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want a corrupt *Error naming the file", name, err)
		}
	}
	path := filepath.Join(fixtures, "corrupt", "badpage.parquet")
	plan, err := PlanFiles(context.Background(), []string{path}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Paths {
		d, _ := NewUnitDecoder(p, plan.Fields)
		var b column.Batch
		err := d.Decode(context.Background(), plan.Units[0], &b)
		d.Close()
		var e *Error
		if !errors.As(err, &e) || e.File != path || e.RowGroup != 0 {
			t.Fatalf("%v: got %v, want an *Error naming the file and row group 0", p, err)
		}
		if p == PathOwn {
			if e.Column != "seq_0" || e.PageOffset <= 0 || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("own: got %v, want a corrupt error naming column seq_0 and the page offset", err)
			}
			t.Logf("own: %v", err)
		}
	}
}
