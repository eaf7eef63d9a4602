package icebergtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Catalog is a REST catalog serving tables the way lastmile reads them:
// GET /v1/config (with the route prefix in overrides, if any) and
// GET /v1/{prefix}/namespaces/{ns}/tables/{table}, answering each table's
// current metadata. It counts the table requests.
type Catalog struct {
	Prefix string

	mu       sync.Mutex
	tables   map[string]*Table // "ns\x1ftable" or "ns.table" → table
	Requests int
}

// Add serves t as namespace.name ("db.events"; levels of a namespace
// separated by dots).
func (c *Catalog) Add(name string, t *Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tables == nil {
		c.tables = map[string]*Table{}
	}
	c.tables[name] = t
}

func (c *Catalog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet {
		restErr(w, http.StatusMethodNotAllowed, "BadRequestException", "GET only")
		return
	}
	if r.URL.Path == "/v1/config" {
		cfg := map[string]map[string]string{"defaults": {}, "overrides": {}}
		if c.Prefix != "" {
			cfg["overrides"]["prefix"] = c.Prefix
		}
		json.NewEncoder(w).Encode(cfg)
		return
	}
	route := "/v1/"
	if c.Prefix != "" {
		route += c.Prefix + "/"
	}
	rest, ok := strings.CutPrefix(r.URL.Path, route+"namespaces/")
	ns, table, ok2 := strings.Cut(rest, "/tables/")
	if !ok || !ok2 {
		restErr(w, http.StatusNotFound, "NotFoundException", "no route "+r.URL.Path)
		return
	}
	c.mu.Lock()
	c.Requests++
	t := c.tables[strings.ReplaceAll(ns, "\x1f", ".")+"."+table]
	c.mu.Unlock()
	if t == nil {
		restErr(w, http.StatusNotFound, "NoSuchTableException", "Table does not exist: "+ns+"."+table)
		return
	}
	meta, err := t.MetadataJSON()
	if err != nil {
		restErr(w, http.StatusInternalServerError, "ServerError", err.Error())
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"metadata-location": t.MetadataPath(), "metadata": json.RawMessage(meta)})
}

func restErr(w http.ResponseWriter, code int, typ, msg string) {
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
