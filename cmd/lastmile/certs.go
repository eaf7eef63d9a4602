package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// runCerts makes the mutual-TLS material of a cluster of lastmiled hosts:
// a CA once, then a certificate per host (docs/peers.md).
func runCerts(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("certs", stderr)
	dir := fs.String("dir", "certs", "directory of ca.pem and ca-key.pem; host certificates are written here too")
	hosts := fs.String("hosts", "", "comma-separated IP addresses and DNS names the certificate is valid for (default: NAME)")
	days := fs.Int("days", 365, "validity in days")
	roleName := fs.String("role", "both", "what the certificate may be: peer (a CPU peer: TLS server only), requester (a GPU host: TLS client only), or both")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: lastmile certs [flags] ca
       lastmile certs [flags] NAME

"ca" makes DIR/ca.pem and DIR/ca-key.pem, the cluster's certificate
authority (keep ca-key.pem off the hosts). NAME makes DIR/NAME.pem and
DIR/NAME-key.pem, signed by it, valid for -hosts, usable as peer.tls
(-role peer), as peers.tls (-role requester) of lastmiled.yaml, or as
both (the default). Every host trusts only certificates the CA signed;
give CPU peers -role peer and GPU hosts -role requester, so that a
peer's key cannot ask other peers for units.

Flags:`)
		printFlags(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"ca\" or a host name", errUsage)
	}
	validity := time.Duration(*days) * 24 * time.Hour
	if *days < 1 {
		return fmt.Errorf("%w: -days %d: want at least 1", errUsage, *days)
	}
	name := fs.Arg(0)
	if name == "ca" {
		ca, err := peer.NewCA(*dir, "lastmile CA", validity)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(ca.Dir, "ca.pem"), filepath.Join(ca.Dir, "ca-key.pem"))
		return nil
	}
	if strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%w: host name %q: no '/', and not starting with '.'", errUsage, name)
	}
	ca, err := peer.LoadCA(*dir)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("no CA in %s: run 'lastmile certs -dir %s ca' first", *dir, *dir)
		}
		return err
	}
	list := []string{name}
	if *hosts != "" {
		list = strings.Split(*hosts, ",")
	}
	role, err := peer.ParseRole(*roleName)
	if err != nil {
		return fmt.Errorf("%w: -role: %v", errUsage, err)
	}
	f, err := ca.IssueRole(*dir, name, list, validity, role)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s for %s\n  tls: {ca: %s, cert: %s, key: %s}\n", f.Cert, f.Key, strings.Join(list, ", "), f.CA, f.Cert, f.Key)
	return nil
}
