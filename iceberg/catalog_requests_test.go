package iceberg_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// TestCatalogTimeoutNotRetried: docs/storage.md says a catalog
// request is made again when the catalog answers 429 or 502-504 "or
// that fails to connect". A catalog that accepts the connection and
// never answers (the client's timeout, 30 s in lastmiled) is asked three
// times, holding the job's planning three timeouts and more.
func TestCatalogTimeoutNotRetried(t *testing.T) {
	var requests atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	o := iceberg.Opener{HTTP: &http.Client{Timeout: 100 * time.Millisecond}}
	_, err := o.Scan(context.Background(), "iceberg:"+srv.URL+"?table=lake.db.events")
	if err == nil {
		t.Fatal("no error from a catalog that never answers")
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("a catalog that connected and timed out was asked %d times; the docs retry only a request that fails to connect (%v)", n, err)
	}
}

// TestCatalogRedirectLoopNotRetried: a catalog that redirects
// to itself forever fails after 5 redirects; that error is no busy
// catalog nor a failed connection, yet the request is made again twice.
func TestCatalogRedirectLoopNotRetried(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	_, err := iceberg.Opener{}.Scan(context.Background(), "iceberg:"+srv.URL+"?table=lake.db.events")
	if err == nil {
		t.Fatal("no error from a redirect loop")
	}
	if n := requests.Load(); n > 6 {
		t.Fatalf("a redirect loop was followed for %d requests (5 redirects, then asked again twice); want 6 (%v)", n, err)
	}
}

// TestCatalogHTTPSUpgrade: a catalog named by http:// whose
// host redirects every request to https:// on the same host (an ingress
// that upgrades, as most do) worked before redirects were restricted:
// the upgrade sends the request to the same host, encrypted, and no
// other service; it is refused as a redirect away from the catalog.
func TestCatalogHTTPSUpgrade(t *testing.T) {
	tab, _, s2, _, _ := twoSnapshots(t)
	cat := &icebergtest.Catalog{}
	cat.Add("lake.db.events", tab)
	tlsSrv := httptest.NewTLSServer(cat)
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://catalog.test"+r.URL.RequestURI(), http.StatusMovedPermanently)
	}))
	defer plain.Close()
	// catalog.test:80 is the plain server, catalog.test:443 the TLS one.
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to := plain.Listener.Addr().String()
		if strings.HasSuffix(addr, ":443") {
			to = tlsSrv.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate
	o := iceberg.Opener{HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	sc, err := o.Scan(context.Background(), "iceberg:http://catalog.test?table=lake.db.events")
	if err != nil {
		t.Fatalf("a catalog whose host upgrades http to https: %v", err)
	}
	if sc.SnapshotID != s2 {
		t.Fatalf("snapshot %d, want %d", sc.SnapshotID, s2)
	}
}
