package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

// genUsage is gen's help text before its flags.
const genUsage = `usage: lastmile gen [flags] [DIR]

Writes deterministic recommender-style Parquet into DIR. With -npy, also
writes the same rows as .npy files; with -spam-users, also writes the
spam-user side table of the anti-join. DIR may be omitted when -npy or
-spam-users is given. Flags go before DIR.

Examples:
  lastmile gen --rows 4000000 --files 8 out/ctr
  lastmile gen --spam-users out/ctr-spam.parquet
  lastmile gen --rows 1000000 --npy out/ctr-npy --spam-users out/ctr-spam.parquet out/ctr

Flags:
`

// genOptions are gen's flags and arguments once parsed and checked.
type genOptions struct {
	cfg          datagen.Config
	npyDir       string
	spamPath     string
	spamFraction float64
	args         []string // [DIR] or none
}

func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseGenFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg := o.cfg
	if len(o.args) == 1 {
		start := time.Now()
		files, err := datagen.Write(ctx, o.args[0], cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d rows in %d files to %s in %.2fs\n", cfg.Rows, len(files), o.args[0], time.Since(start).Seconds())
	}
	if o.npyDir != "" {
		start := time.Now()
		if err := datagen.WriteNPY(ctx, o.npyDir, cfg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d rows as %d .npy files to %s in %.2fs\n", cfg.Rows, len(datagen.NPYFiles(cfg)), o.npyDir, time.Since(start).Seconds())
	}
	if o.spamPath != "" {
		return writeGenSpam(ctx, o, stdout)
	}
	return nil
}

// parseGenFlags parses gen's flags and checks them with its arguments
// before anything is written.
func parseGenFlags(args []string, stderr io.Writer) (*genOptions, error) {
	fs := newFlags("gen", stderr)
	o := &genOptions{cfg: datagen.DefaultConfig()}
	cfg := &o.cfg
	fs.Int64Var(&cfg.Rows, "rows", cfg.Rows, "total rows")
	fs.Int64Var(&cfg.RowGroupRows, "row-group-rows", cfg.RowGroupRows, "rows per row group")
	fs.IntVar(&cfg.Files, "files", cfg.Files, "number of files the rows are split over")
	fs.StringVar(&cfg.Compression, "compression", cfg.Compression, "page compression: snappy, zstd, gzip, brotli or none")
	fs.IntVar(&cfg.Dense, "dense", cfg.Dense, "float32 dense features")
	fs.IntVar(&cfg.Cats, "cats", cfg.Cats, "skewed int64 categorical features")
	fs.IntVar(&cfg.Seqs, "seqs", cfg.Seqs, "list<int64> sequence features")
	fs.IntVar(&cfg.SeqMeanLen, "seq-mean-len", cfg.SeqMeanLen, "mean sequence length")
	fs.IntVar(&cfg.SeqMaxLen, "seq-max-len", cfg.SeqMaxLen, "longest sequence")
	fs.BoolVar(&cfg.Nullable, "nullable", cfg.Nullable, "add nullable columns (dense_opt, cat_opt, seq_opt, query_opt)")
	fs.Float64Var(&cfg.NullFraction, "null-fraction", cfg.NullFraction, "fraction of nulls in nullable columns")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed: the same seed gives the same rows")
	fs.IntVar(&cfg.PageRows, "page-rows", cfg.PageRows, "also close every column's data page at this many rows, as parquet-java (Spark) and arrow-rs do at 20000; 0: by size alone (1 MiB)")
	fs.IntVar(&cfg.DataPageVersion, "page-version", cfg.DataPageVersion, "Parquet data page version, 1 or 2 (either way every file carries the page index: a column and an offset index per column chunk)")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "file name prefix")
	fs.StringVar(&o.npyDir, "npy", "", "also write the same rows as NumPy .npy files (one per column part, and manifest.json)\ninto this `directory`, for the DataLoader baseline (bench/baseline); DIR may then be omitted")
	fs.StringVar(&o.spamPath, "spam-users", "", "also write the spam-user side table (sorted unique int64 user_id) to this Parquet `file`,\nand its ids as a .npy next to it (a trailing .parquet replaced by .npy); DIR may then be omitted.\nOnly -seed and -spam-fraction change it")
	fs.Float64Var(&o.spamFraction, "spam-fraction", datagen.DefaultSpamFraction, "share of all user ids that -spam-users marks as spam, chosen by a hash of the seed and the id")
	fs.Usage = func() {
		fmt.Fprint(stderr, genUsage)
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 1 {
		return nil, fmt.Errorf("%w: want at most one output directory, got %d arguments", errUsage, fs.NArg())
	}
	if fs.NArg() == 0 && o.npyDir == "" && o.spamPath == "" {
		return nil, fmt.Errorf("%w: want an output directory, -npy DIR or -spam-users FILE", errUsage)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if o.spamPath != "" {
		if _, err := datagen.SpamUsers(*cfg, o.spamFraction); err != nil {
			return nil, fmt.Errorf("%w: -spam-fraction: want 0..1, got %v", errUsage, o.spamFraction)
		}
	}
	o.args = fs.Args()
	return o, nil
}

// writeGenSpam writes -spam-users: the side table as Parquet and its ids
// as .npy.
func writeGenSpam(ctx context.Context, o *genOptions, stdout io.Writer) error {
	cfg := o.cfg
	if err := datagen.WriteSpamUsers(ctx, o.spamPath, cfg, o.spamFraction); err != nil {
		return err
	}
	npy := datagen.SpamNPYPath(o.spamPath)
	if err := datagen.WriteSpamUsersNPY(ctx, npy, cfg, o.spamFraction); err != nil {
		return err
	}
	ids, _ := datagen.SpamUsers(cfg, o.spamFraction)
	fmt.Fprintf(stdout, "wrote %d spam users (%.4g of %d user ids, seed %d) to %s and %s\n",
		len(ids), o.spamFraction, datagen.Users, cfg.Seed, o.spamPath, npy)
	return nil
}
