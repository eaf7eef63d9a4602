package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cpupeer "github.com/lastmile/lastmile/peer"
)

// TestWarnExpiryNamesTheCA: the expiry warning looks at the CA a
// certificate is verified against as well as at the certificate. A host
// certificate renewed in place (lastmile certs NAME again, as the warning
// says to do) outlives the CA that signed it, which lastmile certs does
// not renew: when the CA ends every handshake fails, and a warning that
// looked at the certificate alone said nothing of it.
func TestWarnExpiryNamesTheCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := cpupeer.NewCA(filepath.Join(dir, "ca"), "ca", 10*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Issue(t.TempDir(), "host", []string{"127.0.0.1"}, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := files.Open()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	d := &Daemon{log: slog.New(slog.NewTextHandler(&buf, nil))}
	d.warnExpiry("peer.tls", creds)
	out := buf.String()
	if !strings.Contains(out, "expires soon") || !strings.Contains(out, "CA") {
		t.Fatalf("a CA ending in 10 days under a certificate of a year: logged %q; want a warning naming the CA", out)
	}
}
