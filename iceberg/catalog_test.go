package iceberg_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

func TestRESTCatalog(t *testing.T) {
	tab, s1, s2, _, _ := twoSnapshots(t)
	for _, prefix := range []string{"", "warehouse1"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			cat := &icebergtest.Catalog{Prefix: prefix}
			cat.Add("lake.db.events", tab)
			srv := httptest.NewServer(cat)
			defer srv.Close()
			ctx := context.Background()
			in := "iceberg:" + srv.URL + "?table=lake.db.events"
			sc, err := iceberg.Opener{}.Scan(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if sc.SnapshotID != s2 || countRows(sc.Files) != 150 {
				t.Errorf("current: snapshot %d, %d rows; want %d, 150", sc.SnapshotID, countRows(sc.Files), s2)
			}
			sc, err = iceberg.Opener{}.Scan(ctx, fmt.Sprintf("%s&snapshot=%d", in, s1))
			if err != nil || sc.SnapshotID != s1 || countRows(sc.Files) != 100 {
				t.Fatalf("snapshot %d: %+v, %v", s1, sc, err)
			}
			pinned, id, err := iceberg.Opener{}.Pin(ctx, in)
			if err != nil || id != s2 || !strings.Contains(pinned, fmt.Sprintf("snapshot=%d", s2)) {
				t.Errorf("Pin = %q, %d, %v", pinned, id, err)
			}
			_, err = iceberg.Opener{}.Scan(ctx, "iceberg:"+srv.URL+"?table=lake.db.nope")
			if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "NoSuchTableException") ||
				!strings.Contains(err.Error(), "check the namespace and table name") {
				t.Errorf("missing table: %v", err)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "iceberg:/wh/t/metadata/v1.metadata.json", want: "iceberg:/wh/t/metadata/v1.metadata.json"},
		{in: "iceberg:/wh/v1.metadata.json?snapshot=42", want: "iceberg:/wh/v1.metadata.json?snapshot=42"},
		{in: "iceberg:s3://b/t/metadata/v1.metadata.json", want: "iceberg:s3://b/t/metadata/v1.metadata.json"},
		{in: "iceberg:http://cat:8181/api/?table=a.b.c&snapshot=-5", want: "iceberg:http://cat:8181/api?snapshot=-5&table=a.b.c"},
		{in: "/wh/v1.metadata.json", err: "want iceberg:LOCATION"},
		{in: "iceberg:", err: "no location"},
		{in: "iceberg:/wh/v1.json?snapshot=0", err: "non-zero integer"},
		{in: "iceberg:/wh/v1.json?snapshot=x", err: "non-zero integer"},
		{in: "iceberg:/wh/v1.json?snap=1", err: `unknown parameter "snap"`},
		{in: "iceberg:/wh/v1.json?snapshot=1&snapshot=2", err: "given 2 times"},
		{in: "iceberg:http://cat:8181", err: "needs ?table="},
		{in: "iceberg:http://cat:8181?table=events", err: "want NAMESPACE.TABLE"},
		{in: "iceberg:http://cat:8181?table=db..t", err: "want NAMESPACE.TABLE"},
		{in: "iceberg:/wh/v1.json?table=db.t", err: "table= is for REST catalogs"},
		{in: "iceberg:gs://b/v1.json", err: "gs:// is not supported"},
		{in: "iceberg:file://rel/v1.json", err: "want file:///ABSOLUTE/PATH"},
		{in: "iceberg:http://u:p@cat/x?table=a.b", err: "want http(s)://HOST"},
	} {
		r, err := iceberg.ParseRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRef(%q) = %v, want error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.String() != tc.want {
			t.Errorf("ParseRef(%q) = %q, %v; want %q", tc.in, r.String(), err, tc.want)
		}
	}
}

// TestRESTCatalogBusyAndRedirects: a catalog that answers 503 (or 429)
// once is asked again, as S3 reads are, instead of failing the submission;
// a 404 is not asked again. A redirect within the catalog's host is
// followed; one to another host is refused: lastmiled asks catalogs for
// its users, and would otherwise request whatever a catalog named.
func TestRESTCatalogBusyAndRedirects(t *testing.T) {
	tab, _, s2, _, _ := twoSnapshots(t)
	cat := &icebergtest.Catalog{}
	cat.Add("lake.db.events", tab)
	var requests atomic.Int32
	var busy atomic.Int32
	busy.Store(2)
	other := httptest.NewServer(cat)
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case strings.HasPrefix(r.URL.Path, "/away/"):
			http.Redirect(w, r, other.URL+strings.TrimPrefix(r.URL.EscapedPath(), "/away"), http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/moved/"):
			http.Redirect(w, r, strings.TrimPrefix(r.URL.EscapedPath(), "/moved"), http.StatusFound)
		case busy.Add(-1) >= 0:
			http.Error(w, "slow down", http.StatusServiceUnavailable)
		default:
			cat.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	sc, err := iceberg.Opener{}.Scan(ctx, "iceberg:"+srv.URL+"?table=lake.db.events")
	if err != nil || sc.SnapshotID != s2 {
		t.Fatalf("after two 503s: %v", err)
	}
	requests.Store(0)
	var o iceberg.Opener
	if _, err := o.Scan(ctx, "iceberg:"+srv.URL+"?table=lake.db.nope"); err == nil || requests.Load() != 2 {
		t.Fatalf("missing table: %v after %d requests, want an error after 2 (config, table)", err, requests.Load())
	}
	if _, err := o.Scan(ctx, "iceberg:"+srv.URL+"/moved?table=lake.db.events"); err != nil {
		t.Fatalf("redirect within the host: %v", err)
	}
	_, err = iceberg.Opener{}.Scan(ctx, "iceberg:"+srv.URL+"/away?table=lake.db.events")
	if err == nil || !strings.Contains(err.Error(), "within its host only") {
		t.Fatalf("redirect to another host: %v", err)
	}
}
