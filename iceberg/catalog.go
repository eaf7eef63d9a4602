package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// restTable is what lastmile reads of a REST catalog's LoadTableResult
// (GET /v1/{prefix}/namespaces/{ns}/tables/{table}).
type restTable struct {
	MetadataLocation string          `json:"metadata-location"`
	Metadata         json.RawMessage `json:"metadata"`
}

// restConfig is what lastmile reads of GET /v1/config: the prefix of the
// catalog's other routes, if it sets one.
type restConfig struct {
	Defaults  map[string]string `json:"defaults"`
	Overrides map[string]string `json:"overrides"`
}

// restError is the catalog's ErrorModel, wrapped in "error".
type restError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// loadREST loads a table's metadata from a REST catalog: GET /v1/config
// for the route prefix, then the table. It sends no credentials: catalogs
// that require authentication are not supported (docs/storage.md).
func loadREST(ctx context.Context, client *http.Client, r Ref) (*Metadata, string, error) {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	client = sameHost(client, r.Catalog)
	var cfg restConfig
	if err := getJSON(ctx, client, r.Catalog+"/v1/config", &cfg); err != nil {
		return nil, "", err
	}
	prefix := cfg.Overrides["prefix"]
	if prefix == "" {
		prefix = cfg.Defaults["prefix"]
	}
	route := r.Catalog + "/v1/"
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		// The prefix may be several segments ("catalogs/main"): each is
		// escaped, the '/' between them kept, as Iceberg's clients (Java's
		// ResourcePaths, iceberg-go's JoinPath) send it.
		for _, seg := range strings.Split(prefix, "/") {
			route += url.PathEscape(seg) + "/"
		}
	}
	// Namespace levels are joined with the unit separator (0x1F).
	route += "namespaces/" + url.PathEscape(strings.Join(r.Namespace, "\x1f")) + "/tables/" + url.PathEscape(r.Table)
	var t restTable
	if err := getJSON(ctx, client, route, &t); err != nil {
		return nil, "", err
	}
	if len(t.Metadata) == 0 {
		return nil, "", fmt.Errorf("catalog answered %s without table metadata", route)
	}
	m, err := ParseMetadata(t.Metadata)
	if err != nil {
		return nil, "", fmt.Errorf("catalog table %s: %w", route, err)
	}
	return m, t.MetadataLocation, nil
}

// sameHost returns client refusing redirects away from the catalog's
// scheme and host: lastmiled asks catalogs for users, and a catalog that
// sent it elsewhere (another service of its network) would have it make
// requests the user chose.
func sameHost(client *http.Client, catalog string) *http.Client {
	base, err := url.Parse(catalog)
	if err != nil {
		return client
	}
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// http to https on the same host and default ports: a front end
		// that moves its clients to TLS.
		upgrade := base.Scheme == "http" && req.URL.Scheme == "https" && req.URL.Hostname() == base.Hostname() &&
			(base.Port() == "" || base.Port() == "80") && (req.URL.Port() == "" || req.URL.Port() == "443")
		if !upgrade && (req.URL.Scheme != base.Scheme || req.URL.Host != base.Host) {
			return fmt.Errorf("%w: catalog %s redirected to %s", errRedirect, catalog, req.URL.Redacted())
		}
		if len(via) >= 5 {
			return fmt.Errorf("catalog %s: more than 5 redirects", catalog)
		}
		return nil
	}
	return &c
}

// errRedirect is a redirect sameHost refuses.
var errRedirect = errors.New("lastmile follows a catalog's redirects within its host only")

// catalogTries is how many times a catalog request is made when the
// catalog answers 429 or 502-504, or the connection fails.
const catalogTries = 3

// getJSON GETs u and decodes its JSON body into v, trying again (after
// 0.2 s, then 0.4 s) when the catalog is busy or unreachable; a status
// other than 200 is an error with the catalog's message.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	for try := 1; ; try++ {
		again, err := getJSONOnce(ctx, client, u, v)
		if err == nil || !again || try == catalogTries || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
}

// getJSONOnce is one request of getJSON; again reports whether its error
// is worth another try.
func getJSONOnce(ctx context.Context, client *http.Client, u string, v any) (again bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("catalog request %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// Again only where no connection was made: a catalog that took
		// the request and timed out, or redirected in circles, would
		// only do so again.
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial", fmt.Errorf("catalog: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxMetadataBytes+1))
	if err != nil {
		return false, fmt.Errorf("catalog: read %s: %w", u, err)
	}
	if len(body) > MaxMetadataBytes {
		return false, fmt.Errorf("catalog: %s answered more than %d bytes", u, MaxMetadataBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e restError
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Type + ": " + e.Error.Message
		}
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		hint := ""
		switch resp.StatusCode {
		case http.StatusNotFound:
			hint = " (check the namespace and table name)"
		case http.StatusUnauthorized, http.StatusForbidden:
			hint = " (lastmile sends no catalog credentials: use the table's metadata file location instead)"
		}
		busy := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 502 && resp.StatusCode <= 504
		return busy, fmt.Errorf("catalog: GET %s: %s: %s%s", u, resp.Status, msg, hint)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("catalog: %s: %w", u, err)
	}
	return false, nil
}
