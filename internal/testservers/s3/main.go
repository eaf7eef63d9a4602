// Command s3server is lastmile's S3 test server: versitygw's embedded
// gateway (package embedgw) over its posix backend, serving the
// directories under -root as buckets on a loopback address. Tests build it
// from this nested module (so versitygw's many dependencies stay out of
// lastmile's go.mod) and run it as a subprocess; see package
// objstore/s3test.
//
// It prints "ready ADDR" on stdout once the gateway answers, and stops on
// SIGINT, SIGTERM or when stdin closes (so a killed test leaves no server
// behind).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

func main() {
	root := flag.String("root", "", "directory whose subdirectories are the buckets")
	sidecar := flag.String("sidecar", "", "directory for object metadata (outside -root)")
	addr := flag.String("addr", "127.0.0.1:0", "listen address; port 0 picks a free one")
	access := flag.String("access", "lastmile", "root access key id")
	secret := flag.String("secret", "lastmile-secret", "root secret access key")
	flag.Parse()
	if *root == "" || *sidecar == "" {
		log.Fatal("s3server: -root and -sidecar are required")
	}
	a, err := pickAddr(*addr)
	if err != nil {
		log.Fatalf("s3server: %v", err)
	}
	ms, err := meta.NewSideCar(*sidecar)
	if err != nil {
		log.Fatalf("s3server: sidecar: %v", err)
	}
	be, err := posix.New(*root, ms, posix.PosixOpts{NewDirPerm: 0o755, Concurrency: 256})
	if err != nil {
		log.Fatalf("s3server: posix backend: %v", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	cfg := &embedgw.Config{
		RootUserAccess: *access, RootUserSecret: *secret, Region: "us-east-1",
		Ports: []string{a}, Quiet: true, KeepAlive: true, HealthPath: "/healthz",
		MaxConnections: 1024, MaxRequests: 1024, MultipartMaxParts: 10000,
	}
	errc := make(chan error, 1)
	go func() { errc <- embedgw.RunVersityGW(ctx, be, cfg) }()
	for i := 0; ; i++ {
		select {
		case err := <-errc:
			log.Fatalf("s3server: gateway stopped: %v", err)
		default:
		}
		resp, err := http.Get("http://" + a + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 500 {
			log.Fatalf("s3server: gateway not healthy after 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("ready %s\n", a)
	if err := <-errc; err != nil && ctx.Err() == nil {
		log.Fatalf("s3server: %v", err)
	}
}

// pickAddr resolves port 0 to a free port (the gateway needs a fixed one).
func pickAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
