package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/objstore/s3test"
)

// S3Config configures RunS3: the sample decoded from local files and from
// an S3 server on loopback (versitygw, package s3test).
type S3Config struct {
	Data        string   // sample Parquet directory; empty: generated once under $TMPDIR
	Rows        int64    // rows to generate when there is no data
	Compression string   // of generated data
	Columns     []string // the projected job's columns; empty: the sample's first two
	Workers     int      // decode workers; 0 is 2
	Repeats     int      // runs of each measurement, the best counts; 0 is 2
	Log         io.Writer
}

// S3Report compares reading the sample over S3 with reading it locally.
type S3Report struct {
	Files     int            `json:"files"`
	FileBytes int64          `json:"file_bytes"`
	Local     decode.Result  `json:"local"`
	S3        decode.Result  `json:"s3"`
	S3Stats   objstore.Stats `json:"s3_stats"` // of the best S3 pass's client
	// The projected job: the bytes fetched (client-side count of response
	// bodies) against the files' size and against the projected chunks.
	Projected      []string `json:"projected"`
	FetchedBytes   int64    `json:"fetched_bytes"`
	ChunkBytes     int64    `json:"chunk_bytes"`
	Requests       int64    `json:"requests"`
	FooterRequests int64    `json:"footer_requests"` // planning's requests, per file
}

// RunS3 starts the S3 test server over a copy of the sample, then decodes
// every column locally and over S3 (the same workers, alternating runs so
// both see the same machine, the first of each round local in odd rounds
// and S3 in even ones), and plans and decodes a projected job over
// S3, counting the bytes fetched.
func RunS3(ctx context.Context, cfg S3Config) (*S3Report, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Repeats <= 0 {
		cfg.Repeats = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := sampleDir(ctx, cfg.Data, cfg.Rows, cfg.Compression, cfg.Log)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "lastmile-bench-s3")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	r := &S3Report{}
	if err := copySample(dir, filepath.Join(root, "bench"), r); err != nil {
		return nil, err
	}
	fmt.Fprintln(cfg.Log, "(s3) starting the S3 test server (the first run builds it: minutes) ...")
	srv, err := s3test.Start(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("s3 test server: %w", err)
	}
	defer srv.Close()
	newSource := func() (*objstore.Source, error) {
		c, err := objstore.New(objstore.Config{Endpoint: srv.Endpoint, PathStyle: true, AccessKey: s3test.Access, SecretKey: s3test.Secret})
		if err != nil {
			return nil, err
		}
		return c.Source(nil), nil
	}
	local, err := decode.PlanFiles(ctx, []string{dir}, decode.PlanOptions{})
	if err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Repeats; i++ {
		// Local and S3 swap places every round, so that neither always
		// runs first.
		for _, side := range roundOrder(i, []string{"local", "S3"}) {
			fmt.Fprintf(cfg.Log, "(s3) decode every column, %s, %d workers, run %d ...\n", side, cfg.Workers, i+1)
			var err error
			if side == "local" {
				err = r.decodeLocal(ctx, cfg, local)
			} else {
				err = r.decodeS3(ctx, cfg, newSource)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return r, r.projected(ctx, cfg, local, newSource)
}

// decodeLocal decodes every column of the local sample once, keeping the
// fastest pass in r.Local.
func (r *S3Report) decodeLocal(ctx context.Context, cfg S3Config, local *decode.Plan) error {
	res, err := decode.Measure(ctx, local, decode.PathOwn, cfg.Workers)
	if err != nil {
		return err
	}
	if r.Local.Seconds == 0 || res.Seconds < r.Local.Seconds {
		r.Local = res
	}
	return nil
}

// decodeS3 plans the sample over S3 with a new client and decodes every
// column once, keeping the fastest pass in r.S3 and its client's counts.
func (r *S3Report) decodeS3(ctx context.Context, cfg S3Config, newSource func() (*objstore.Source, error)) error {
	src, err := newSource()
	if err != nil {
		return err
	}
	remote, err := decode.PlanFiles(ctx, []string{"s3://bench/"}, decode.PlanOptions{FS: objstore.Mount(nil, src)})
	if err != nil {
		return err
	}
	res, err := decode.Measure(ctx, remote, decode.PathOwn, cfg.Workers)
	if err != nil {
		return err
	}
	if r.S3.Seconds == 0 || res.Seconds < r.S3.Seconds {
		r.S3, r.S3Stats = res, src.Client().Stats()
	}
	return nil
}

// projected plans and decodes the projected job over S3 once.
func (r *S3Report) projected(ctx context.Context, cfg S3Config, local *decode.Plan, newSource func() (*objstore.Source, error)) error {
	cols := cfg.Columns
	if len(cols) == 0 && len(local.Fields) >= 2 {
		cols = []string{local.Fields[0].Name, local.Fields[1].Name}
	}
	src, err := newSource()
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Log, "(s3) a job projecting %v over S3 ...\n", cols)
	plan, err := decode.PlanFiles(ctx, []string{"s3://bench/"}, decode.PlanOptions{Columns: cols, FS: objstore.Mount(nil, src)})
	if err != nil {
		return err
	}
	// Planning: one LIST, then the footers.
	r.FooterRequests = (src.Client().Stats().Requests - 1) / int64(max(len(plan.Files), 1))
	d := plan.NewDecoder()
	defer d.Close()
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(ctx, u, &b); err != nil {
			return err
		}
		for _, c := range u.Chunks {
			r.ChunkBytes += c.End - c.Offset + c.DictLen
		}
	}
	st := src.Client().Stats()
	r.Projected, r.FetchedBytes, r.Requests = cols, st.Bytes, st.Requests
	return nil
}

// copySample puts the sample's files in the bucket directory (hard links
// where the file system allows, else copies).
func copySample(dir, bucket string, r *S3Report) error {
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	for _, f := range files {
		dst := filepath.Join(bucket, filepath.Base(f))
		if err := os.Link(f, dst); err != nil {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				return err
			}
		}
		st, err := os.Stat(dst)
		if err != nil {
			return err
		}
		r.Files++
		r.FileBytes += st.Size()
	}
	return nil
}

// WriteTable prints the comparison.
func (r *S3Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "S3 on loopback (versitygw) against local files: %d files, %.1f MB\n", r.Files, float64(r.FileBytes)/1e6)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  source\tworkers\tMB/s out\tCPU s per GB out\trequests\tretries")
	for _, x := range []struct {
		name string
		res  decode.Result
		st   objstore.Stats
	}{{"local", r.Local, objstore.Stats{}}, {"s3", r.S3, r.S3Stats}} {
		fmt.Fprintf(tw, "  %s\t%d\t%.0f\t%.2f\t%d\t%d\n", x.name, x.res.Workers, x.res.MBps(),
			x.res.CPUSeconds/(float64(x.res.OutBytes)/1e9), x.st.Requests, x.st.Retries)
	}
	tw.Flush()
	if r.Local.Seconds > 0 && r.S3.Seconds > 0 {
		fmt.Fprintf(w, "  S3 throughput is %.2fx local (same run)\n", r.Local.Seconds/r.S3.Seconds)
	}
	fmt.Fprintf(w, "  projected job %v: fetched %.1f MB of %.1f MB of files (%.1f%%); its column chunks are %.1f MB; %d requests, %d per footer\n",
		r.Projected, float64(r.FetchedBytes)/1e6, float64(r.FileBytes)/1e6, 100*float64(r.FetchedBytes)/float64(max(r.FileBytes, 1)),
		float64(r.ChunkBytes)/1e6, r.Requests, r.FooterRequests)
}
