package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lastmile/lastmile/datagen"
)

func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gen", stderr)
	cfg := datagen.DefaultConfig()
	fs.Int64Var(&cfg.Rows, "rows", cfg.Rows, "total rows")
	fs.Int64Var(&cfg.RowGroupRows, "row-group-rows", cfg.RowGroupRows, "rows per row group")
	fs.IntVar(&cfg.Files, "files", cfg.Files, "number of files the rows are split over")
	fs.StringVar(&cfg.Compression, "compression", cfg.Compression, "page compression: snappy, zstd or none")
	fs.IntVar(&cfg.Dense, "dense", cfg.Dense, "float32 dense features")
	fs.IntVar(&cfg.Cats, "cats", cfg.Cats, "skewed int64 categorical features")
	fs.IntVar(&cfg.Seqs, "seqs", cfg.Seqs, "list<int64> sequence features")
	fs.IntVar(&cfg.SeqMeanLen, "seq-mean-len", cfg.SeqMeanLen, "mean sequence length")
	fs.IntVar(&cfg.SeqMaxLen, "seq-max-len", cfg.SeqMaxLen, "longest sequence")
	fs.BoolVar(&cfg.Nullable, "nullable", cfg.Nullable, "add nullable columns (dense_opt, cat_opt, seq_opt, query_opt)")
	fs.Float64Var(&cfg.NullFraction, "null-fraction", cfg.NullFraction, "fraction of nulls in nullable columns")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed: the same seed gives the same rows")
	fs.IntVar(&cfg.DataPageVersion, "page-version", cfg.DataPageVersion, "Parquet data page version, 1 or 2")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "file name prefix")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile gen [flags] DIR\n\nWrites deterministic recommender-style Parquet into DIR.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one output directory, got %d arguments", errUsage, fs.NArg())
	}
	start := time.Now()
	files, err := datagen.Write(ctx, fs.Arg(0), cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d rows in %d files to %s in %.2fs\n", cfg.Rows, len(files), fs.Arg(0), time.Since(start).Seconds())
	return nil
}
