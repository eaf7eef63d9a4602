package datagen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// DefaultSpamFraction is the share of users `lastmile gen --spam-users`
// marks as spam unless told otherwise.
const DefaultSpamFraction = 0.02

// SpamMetadataKey is the key-value metadata key under which the spam-user
// table carries how it was made, as JSON: {"seed", "fraction", "users",
// "rule"}.
const SpamMetadataKey = "lastmile.datagen.spam"

// idSpam is the column id whose key decides which users are spam. Part of
// the output format, like the ids in values.go.
const idSpam = 9

// SpamRule says in words which users SpamUsers picks.
const SpamRule = "user u in [0, Users) is spam iff mix64(columnKey(seed, 9) + (u+1)*golden) < fraction*2^64 " +
	"(splitmix64 finalizer mix64, golden 0x9e3779b97f4a7c15, columnKey as for every datagen column)"

// SpamUsers returns, sorted and unique, the user ids of cfg's tables that
// are "spam": every u in [0, Users) whose hash under cfg.Seed falls under
// fraction of the hash range (see SpamRule). The choice is a pure function
// of (cfg.Seed, fraction, u), independent of popularity, so about fraction
// of all users, and about fraction of the users any table of cfg.Seed
// holds, are spam; an anti-join on user_id drops their rows. Only Seed of
// cfg matters: the set covers the whole id space, so one table serves a
// table of any Rows (ids a table lacks simply never match). Because
// user_id is zipf-like, the share of rows dropped varies more than the
// share of users: the most popular users hold several percent of the rows
// each. fraction must be in [0, 1]; a larger fraction gives a superset.
func SpamUsers(cfg Config, fraction float64) ([]int64, error) {
	if !(fraction >= 0 && fraction <= 1) {
		return nil, &ConfigError{Field: "spam fraction", Value: fraction, Allowed: "0..1"}
	}
	key := columnKey(cfg.Seed, idSpam)
	all := fraction >= 1
	threshold := uint64(fraction * 0x1p64) // fraction < 1 here, so it fits
	ids := make([]int64, 0, int(float64(Users)*fraction*1.1)+16)
	for u := int64(0); u < Users; u++ {
		if all || rowHash(key, u) < threshold {
			ids = append(ids, u)
		}
	}
	return ids, nil
}

// SpamNPYPath returns where `lastmile gen --spam-users PATH` puts the NumPy
// copy of the table: PATH with a trailing ".parquet" replaced by ".npy"
// (out/ctr-spam.parquet → out/ctr-spam.npy), or PATH + ".npy".
func SpamNPYPath(path string) string {
	return strings.TrimSuffix(path, ".parquet") + ".npy"
}

type spamRow struct {
	UserID int64 `parquet:"user_id"`
}

// WriteSpamUsers writes SpamUsers(cfg, fraction) to path as a Parquet
// file with one required INT64 column user_id (PLAIN, cfg.Compression,
// data page version cfg.DataPageVersion, one row group), sorted ascending,
// with SpamMetadataKey in the footer: the side table of the example
// pipeline's anti-join. The file is written under a temporary name and
// renamed when complete.
func WriteSpamUsers(ctx context.Context, path string, cfg Config, fraction float64) error {
	ids, meta, err := spamTable(ctx, cfg, fraction)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(f *os.File) error {
		w := parquet.NewGenericWriter[spamRow](f,
			parquet.Compression(codec(cfg.Compression)),
			parquet.DataPageVersion(cfg.DataPageVersion),
			parquet.PageBufferSize(cfg.PageBytes),
			parquet.CreatedBy("parquet-go", parquetGoVersion, "lastmile datagen"),
			parquet.KeyValueMetadata(SpamMetadataKey, meta),
		)
		rows := make([]spamRow, 0, 4096)
		for i := 0; i < len(ids); i += cap(rows) {
			rows = rows[:0]
			for _, u := range ids[i:min(i+cap(rows), len(ids))] {
				rows = append(rows, spamRow{UserID: u})
			}
			if _, err := w.Write(rows); err != nil {
				return err
			}
		}
		return w.Close()
	})
}

// WriteSpamUsersNPY writes SpamUsers(cfg, fraction) to path as a 1-D int64
// .npy file (NPY 1.0, little-endian), for readers without Parquet such as
// the DataLoader baseline.
func WriteSpamUsersNPY(ctx context.Context, path string, cfg Config, fraction float64) error {
	ids, _, err := spamTable(ctx, cfg, fraction)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(f *os.File) error {
		buf := npyHeader("<i8", int64(len(ids)))
		for _, u := range ids {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(u))
		}
		_, err := f.Write(buf)
		return err
	})
}

func spamTable(ctx context.Context, cfg Config, fraction float64) ([]int64, string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	ids, err := SpamUsers(cfg, fraction)
	if err != nil {
		return nil, "", err
	}
	meta, err := json.Marshal(map[string]any{
		"seed": cfg.Seed, "fraction": fraction, "users": len(ids), "rule": SpamRule,
	})
	if err != nil {
		return nil, "", fmt.Errorf("BUG: marshal spam metadata: %w", err)
	}
	return ids, string(meta), nil
}

// writeAtomic creates path's directory, calls write on a temporary file
// next to path and renames it to path once write and Close succeed.
func writeAtomic(path string, write func(*os.File) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
