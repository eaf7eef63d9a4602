// Command clientbench measures the two candidate S3 clients for lastmile's
// objstore package, aws-sdk-go-v2 and minio-go, on the workload lastmile
// makes: ranged GETs of column chunks (large ranges) and of footers and
// page headers (small ranges), read into a reused buffer. It reports each
// client's throughput and its own CPU time per GB (getrusage of this
// process; the server runs in another process), alternating the clients
// round by round so that both see the same machine, and flipping their
// order every round (the first client in odd rounds, the second in even
// ones) so that neither always runs first or always right after the
// other. docs/storage.md records a run and the choice made from it.
//
//	go run ./clientbench -endpoint http://127.0.0.1:PORT -bucket b -key big.bin
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

type getter func(ctx context.Context, off, n int64, buf []byte) error

func main() {
	endpoint := flag.String("endpoint", "", "http://host:port of the S3 server")
	bucket := flag.String("bucket", "bench", "bucket")
	key := flag.String("key", "big.bin", "object key (at least -size bytes)")
	size := flag.Int64("size", 256<<20, "bytes of the object to read, per pass")
	access := flag.String("access", "lastmile", "access key")
	secret := flag.String("secret", "lastmile-secret", "secret key")
	rounds := flag.Int("rounds", 4, "rounds (each runs every client once per range size; even, so that each client runs first as often)")
	conc := flag.Int("conc", 4, "concurrent requests")
	flag.Parse()
	u, err := url.Parse(*endpoint)
	if err != nil || u.Host == "" {
		log.Fatalf("-endpoint %q: want http://host:port", *endpoint)
	}
	clients := map[string]getter{
		"aws-sdk-go-v2": awsGetter(*endpoint, *bucket, *key, *access, *secret),
		"minio-go":      minioGetter(u.Host, *bucket, *key, *access, *secret),
	}
	names := []string{"aws-sdk-go-v2", "minio-go"}
	if *rounds%2 == 1 {
		log.Printf("-rounds %d is odd: %s runs first in one round more than %s", *rounds, names[0], names[1])
	}
	type tot struct {
		wall, cpu   time.Duration
		bytes, reqs int64
	}
	sums := map[string]*tot{}
	for r := 0; r < *rounds; r++ {
		fmt.Printf("round %d: %s first\n", r+1, roundOrder(r, names)[0])
		for _, rng := range []int64{4 << 20, 64 << 10} {
			for _, name := range roundOrder(r, names) {
				wall, cpu, n, reqs := pass(clients[name], *size, rng, *conc)
				k := fmt.Sprintf("%s range=%dKiB", name, rng>>10)
				if sums[k] == nil {
					sums[k] = &tot{}
				}
				s := sums[k]
				s.wall += wall
				s.cpu += cpu
				s.bytes += n
				s.reqs += reqs
			}
		}
	}
	for _, rng := range []int64{4 << 20, 64 << 10} {
		for _, name := range names {
			k := fmt.Sprintf("%s range=%dKiB", name, rng>>10)
			s := sums[k]
			gb := float64(s.bytes) / 1e9
			fmt.Printf("%-32s %8.0f MB/s  %6.3f CPU s/GB  %7.1f µs CPU/request  %d requests\n", k,
				float64(s.bytes)/1e6/s.wall.Seconds(), s.cpu.Seconds()/gb,
				float64(s.cpu.Microseconds())/float64(s.reqs), s.reqs)
		}
	}
}

// roundOrder is the order the clients run in round r (from 0): as listed
// in even rounds, reversed in odd ones.
func roundOrder(r int, names []string) []string {
	o := slices.Clone(names)
	if r%2 == 1 {
		slices.Reverse(o)
	}
	return o
}

// pass reads size bytes of the object in ranges of rng bytes with conc
// goroutines and returns the wall and process CPU time it took.
func pass(get getter, size, rng int64, conc int) (wall, cpu time.Duration, bytes, reqs int64) {
	ctx := context.Background()
	next := make(chan int64)
	go func() {
		for off := int64(0); off+rng <= size; off += rng {
			next <- off
		}
		close(next)
	}()
	c0 := cpuTime()
	t0 := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, rng)
			for off := range next {
				if err := get(ctx, off, rng, buf); err != nil {
					log.Fatal(err)
				}
				mu.Lock()
				bytes += rng
				reqs++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return time.Since(t0), cpuTime() - c0, bytes, reqs
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func awsGetter(endpoint, bucket, key, access, secret string) getter {
	c := s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                awscreds.NewStaticCredentialsProvider(access, secret, ""),
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
	return func(ctx context.Context, off, n int64, buf []byte) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key,
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		_, err = io.ReadFull(out.Body, buf[:n])
		return err
	}
}

func minioGetter(host, bucket, key, access, secret string) getter {
	c, err := minio.New(host, &minio.Options{Creds: miniocreds.NewStaticV4(access, secret, ""),
		Secure: false, BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		log.Fatal(err)
	}
	return func(ctx context.Context, off, n int64, buf []byte) error {
		var o minio.GetObjectOptions
		if err := o.SetRange(off, off+n-1); err != nil {
			return err
		}
		obj, err := c.GetObject(ctx, bucket, key, o)
		if err != nil {
			return err
		}
		defer obj.Close()
		_, err = io.ReadFull(obj, buf[:n])
		return err
	}
}
