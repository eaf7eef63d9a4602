package datagen_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/datagen"
	"github.com/parquet-go/parquet-go"
)

func TestSpamUsers(t *testing.T) {
	cfg := datagen.DefaultConfig()
	ids, err := datagen.SpamUsers(cfg, datagen.DefaultSpamFraction)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("ids not sorted and unique")
	}
	if ids[0] < 0 || ids[len(ids)-1] >= datagen.Users {
		t.Fatalf("ids run %d..%d, want within [0, %d)", ids[0], ids[len(ids)-1], datagen.Users)
	}
	// About 2% of the users: binomial sd is 140 users.
	if want := 0.02 * datagen.Users; math.Abs(float64(len(ids))-want) > 1000 {
		t.Errorf("%d spam users, want about %v", len(ids), want)
	}
	// Deterministic, nested in fraction, dependent on the seed only.
	again, _ := datagen.SpamUsers(cfg, datagen.DefaultSpamFraction)
	if !slices.Equal(ids, again) {
		t.Error("two calls differ")
	}
	small, _ := datagen.SpamUsers(cfg, 0.005)
	for _, u := range small {
		if _, ok := slices.BinarySearch(ids, u); !ok {
			t.Fatalf("user %d is spam at 0.5%% but not at 2%%", u)
		}
	}
	other := cfg
	other.Rows, other.Dense = 10, 1
	if same, _ := datagen.SpamUsers(other, datagen.DefaultSpamFraction); !slices.Equal(ids, same) {
		t.Error("ids depend on more than the seed")
	}
	other.Seed = 2
	if diff, _ := datagen.SpamUsers(other, datagen.DefaultSpamFraction); slices.Equal(ids, diff) {
		t.Error("ids do not depend on the seed")
	}
	if none, _ := datagen.SpamUsers(cfg, 0); len(none) != 0 {
		t.Errorf("fraction 0 gives %d users", len(none))
	}
	if all, _ := datagen.SpamUsers(cfg, 1); len(all) != datagen.Users {
		t.Errorf("fraction 1 gives %d users", len(all))
	}
	for _, f := range []float64{-0.1, 1.5, math.NaN()} {
		var ce *datagen.ConfigError
		if _, err := datagen.SpamUsers(cfg, f); !errors.As(err, &ce) {
			t.Errorf("fraction %v: err = %v, want a *ConfigError", f, err)
		}
	}

	// The rows of a table that the anti-join drops: those of spam users,
	// about the fraction of users the table holds.
	cfg.Rows = 50_000
	g := datagen.NewGenerator(cfg)
	users := map[int64]bool{}
	for r := range cfg.Rows {
		users[g.UserID(r)] = true
	}
	spam := 0
	for u := range users {
		if _, ok := slices.BinarySearch(ids, u); ok {
			spam++
		}
	}
	if got := float64(spam) / float64(len(users)); math.Abs(got-0.02) > 0.005 {
		t.Errorf("%d of the %d users in %d rows are spam (%.3f), want about 0.02", spam, len(users), cfg.Rows, got)
	}
}

func TestWriteSpamUsers(t *testing.T) {
	cfg := datagen.DefaultConfig()
	want, _ := datagen.SpamUsers(cfg, 0.01)
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "spam.parquet")
	if err := datagen.WriteSpamUsers(context.Background(), path, cfg, 0.01); err != nil {
		t.Fatal(err)
	}
	pf := openFile(t, path)
	cols := pf.Schema().Columns()
	if len(cols) != 1 || len(cols[0]) != 1 || cols[0][0] != "user_id" {
		t.Fatalf("columns %v, want [[user_id]]", cols)
	}
	leaf, _ := pf.Schema().Lookup("user_id")
	if leaf.Node.Type().Kind() != parquet.Int64 || !leaf.Node.Required() {
		t.Errorf("user_id is %v, required %v; want a required INT64", leaf.Node.Type(), leaf.Node.Required())
	}
	var got []int64
	for _, rg := range pf.RowGroups() {
		rows := parquet.NewGenericRowGroupReader[struct {
			UserID int64 `parquet:"user_id"`
		}](rg)
		buf := make([]struct {
			UserID int64 `parquet:"user_id"`
		}, rg.NumRows())
		n, _ := rows.Read(buf)
		for _, r := range buf[:n] {
			got = append(got, r.UserID)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d ids, want %d (first %v vs %v)", len(got), len(want), got[:min(3, len(got))], want[:3])
	}
	meta, ok := pf.Lookup(datagen.SpamMetadataKey)
	if !ok {
		t.Fatal("no spam metadata")
	}
	var m struct {
		Seed     uint64
		Fraction float64
		Users    int
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil || m.Seed != 1 || m.Fraction != 0.01 || m.Users != len(want) {
		t.Errorf("metadata %s (%v)", meta, err)
	}

	npy := datagen.SpamNPYPath(path)
	if npy != filepath.Join(dir, "sub", "spam.npy") {
		t.Errorf("SpamNPYPath = %s", npy)
	}
	if err := datagen.WriteSpamUsersNPY(context.Background(), npy, cfg, 0.01); err != nil {
		t.Fatal(err)
	}
	a := readNPY(t, npy)
	if a.descr != "<i8" || a.n != int64(len(want)) {
		t.Fatalf("npy %s [%d], want <i8 [%d]", a.descr, a.n, len(want))
	}
	for i, u := range want {
		if a.i64(int64(i)) != u {
			t.Fatalf("npy[%d] = %d, want %d", i, a.i64(int64(i)), u)
		}
	}

	if err := datagen.WriteSpamUsers(context.Background(), path, cfg, 2); err == nil {
		t.Error("fraction 2 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := datagen.WriteSpamUsers(ctx, filepath.Join(dir, "x.parquet"), cfg, 0.01); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}
