package main

// The client side of lastmiled's control API (docs/control-api.md): HTTP +
// JSON on a unix socket. The types below are written from the document, not
// shared with the daemon, so that the CLI also checks the document; unknown
// response fields are ignored, as the version policy asks of clients.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// defaultSocketPath is lastmiled's default control socket.
const defaultSocketPath = "/run/lastmile/lastmiled.sock"

// defaultSocket is $LASTMILE_SOCKET or the default path.
func defaultSocket() string {
	if s := os.Getenv("LASTMILE_SOCKET"); s != "" {
		return s
	}
	return defaultSocketPath
}

// socketFlag adds the -socket flag every control command shares.
func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", defaultSocket(), "lastmiled's control socket (default $LASTMILE_SOCKET or "+defaultSocketPath+")")
}

// apiCursor names the next batch a rank needs.
type apiCursor struct {
	Epoch uint64 `json:"epoch"`
	Batch uint64 `json:"batch"`
}

// String prints epoch:batch.
func (c *apiCursor) String() string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%d:%d", c.Epoch, c.Batch)
}

// apiRing is one rank's ring in a Job.
type apiRing struct {
	Rank             int        `json:"rank"`
	Name             string     `json:"name"`
	Dir              string     `json:"dir"`
	Generation       uint64     `json:"generation"`
	Slots            int        `json:"slots"`
	Head             uint64     `json:"head"`
	Tail             uint64     `json:"tail"`
	Occupancy        int        `json:"occupancy"`
	Held             int        `json:"held"`
	ConsumerAttached bool       `json:"consumer_attached"`
	ConsumerPID      int        `json:"consumer_pid"`
	ConsumerWaiting  bool       `json:"consumer_waiting"`
	Next             *apiCursor `json:"next"`
	Produced         *apiCursor `json:"produced"`
	State            string     `json:"state"`
}

// apiProgress is a Job's live counters.
type apiProgress struct {
	Epoch           int64   `json:"epoch"`
	Rows            int64   `json:"rows"`
	Batches         int64   `json:"batches"`
	Bytes           int64   `json:"bytes"`
	UnitsDone       int64   `json:"units_done"`
	UnitsSpilled    int64   `json:"units_spilled"`
	UnitsHedged     int64   `json:"units_hedged"`
	HedgesWon       int64   `json:"hedges_won"`
	UnitsInFlight   int64   `json:"units_in_flight"`
	DecodeSeconds   float64 `json:"decode_seconds"`
	PackSeconds     float64 `json:"pack_seconds"`
	FullWaitSeconds float64 `json:"full_wait_seconds"`
	// Spilled units verified here, and those whose values differed.
	UnitsVerified    int64 `json:"units_verified"`
	VerifyMismatches int64 `json:"verify_mismatches"`
	// The late columns' pages (progressView).
	FilesPruned       int64 `json:"files_pruned"`
	UnitsPruned       int64 `json:"units_pruned"`
	RowsRuledOut      int64 `json:"rows_ruled_out"`
	RowsDeleted       int64 `json:"rows_deleted"`
	LatePages         int64 `json:"late_pages"`
	LatePagesUnread   int64 `json:"late_pages_unread"`
	LateUnreadBytes   int64 `json:"late_unread_bytes"`
	LateFetchDeferred bool  `json:"late_fetch_deferred"`
	ArenaUnits        int64 `json:"arena_units"`
	ArenaUnitsToHeap  int64 `json:"arena_units_to_heap"`
}

// apiSpill is a Job's spill decision; nil without peers.
type apiSpill struct {
	On       bool      `json:"on"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason"`
	Switches int64     `json:"switches"`
}

// apiJob is the Job object.
type apiJob struct {
	ID                 string      `json:"id"`
	Name               string      `json:"name"`
	Owner              int         `json:"owner"`
	GID                int         `json:"gid"`
	State              string      `json:"state"`
	WorldSize          int         `json:"world_size"`
	Hosts              int         `json:"hosts"`
	Host               int         `json:"host"`
	PlanDigest         string      `json:"plan_digest"`
	Counts             string      `json:"counts"`
	Epochs             int         `json:"epochs"`
	Weight             int         `json:"weight"`
	SpecHash           string      `json:"spec_hash"`
	Created            *time.Time  `json:"created"`
	Started            *time.Time  `json:"started"`
	Ended              *time.Time  `json:"ended"`
	Error              string      `json:"error"`
	Unsaved            string      `json:"unsaved"`
	GenerationRestarts int         `json:"generation_restarts"`
	MemoryBytes        int64       `json:"memory_bytes"`
	Rings              []apiRing   `json:"rings"`
	Progress           apiProgress `json:"progress"`
	Spill              *apiSpill   `json:"spill"`
}

// apiStatus is GET /v1/status.
// apiStatusPeers is /v1/status's peers: what the daemon serves as a CPU
// peer, and its own peers.
type apiStatusPeers struct {
	Serving string           `json:"serving"`
	Compute string           `json:"compute"`
	Served  *apiServed       `json:"served"`
	Peers   []peer.PeerStats `json:"peers"`
}

// apiServed is what the daemon has served as a CPU peer: units in flight
// now, units answered, and units refused, by reason.
type apiServed struct {
	InFlight                                int64
	Units, Bytes, Failures                  int64
	RefusedBusy, RefusedOutside, RefusedBad int64
	RefusedDraining, RefusedBuild           int64
}

type apiStatus struct {
	Peers         *apiStatusPeers `json:"peers"`
	Version       string          `json:"version"`
	PID           int             `json:"pid"`
	Started       string          `json:"started"`
	UptimeSeconds float64         `json:"uptime_seconds"`
	Draining      bool            `json:"draining"`
	RestartNeeded []string        `json:"restart_needed"`
	Config        struct {
		Socket              string  `json:"socket"`
		StateDir            string  `json:"state_dir"`
		ShmDir              string  `json:"shm_dir"`
		Metrics             string  `json:"metrics"`
		Workers             int     `json:"workers"`
		MemoryPerJob        int64   `json:"memory_per_job"`
		MemoryTotal         int64   `json:"memory_total"`
		GraceSeconds        float64 `json:"grace_seconds"`
		DrainTimeoutSeconds float64 `json:"drain_timeout_seconds"`
		LogLevel            string  `json:"log_level"`
	} `json:"config"`
	Jobs struct {
		Total    int `json:"total"`
		Pending  int `json:"pending"`
		Running  int `json:"running"`
		Done     int `json:"done"`
		Failed   int `json:"failed"`
		Canceled int `json:"canceled"`
	} `json:"jobs"`
	CPU struct {
		Available int `json:"available"`
		Workers   int `json:"workers"`
		Busy      int `json:"busy"`
	} `json:"cpu"`
	Memory struct {
		Reserved  int64 `json:"reserved"`
		Total     int64 `json:"total"`
		RSS       int64 `json:"rss"`
		HeapLimit int64 `json:"heap_limit"`
	} `json:"memory"`
}

// submitRequest is POST /v1/jobs.
type submitRequest struct {
	Spec      string `json:"spec"`
	WorldSize int    `json:"world_size,omitempty"`
	Hosts     int    `json:"hosts,omitempty"`
	Host      int    `json:"host,omitempty"`
	BaseDir   string `json:"base_dir,omitempty"`
	Weight    int    `json:"weight,omitempty"`
	File      string `json:"file,omitempty"` // the spec's file, for errors
}

// fieldError is one entry of an error's "fields".
type fieldError struct {
	Line  int    `json:"line"`
	Field string `json:"field"`
	Msg   string `json:"msg"`
}

// apiError is an error answer of the daemon.
type apiError struct {
	Status     int
	Message    string       `json:"error"`
	Fields     []fieldError `json:"fields"`
	RetryAfter string
}

func (e *apiError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Status == http.StatusServiceUnavailable && e.RetryAfter != "" {
		fmt.Fprintf(&b, " (retry after %ss)", e.RetryAfter)
	}
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}

func (f fieldError) String() string {
	var b strings.Builder
	if f.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", f.Line)
	}
	if f.Field != "" {
		b.WriteString(f.Field + ": ")
	}
	b.WriteString(f.Msg)
	return b.String()
}

// errDaemon marks errors reaching the daemon at all.
var errDaemon = errors.New("lastmiled unreachable")

// apiClient is a control API client over the unix socket.
type apiClient struct {
	socket string
	hc     *http.Client
}

func newAPIClient(socket string) *apiClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &apiClient{socket: socket, hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// do sends one request and decodes a 2xx answer into out (if not nil). It
// returns the status, an *apiError for 4xx/5xx answers, and an error
// wrapping errDaemon, with advice, when the socket does not answer.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lastmiled"+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, c.dialError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
		}
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *apiClient) dialError(err error) error {
	const hint = "is lastmiled running? (systemctl status lastmiled); if it listens elsewhere, use -socket or LASTMILE_SOCKET"
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: no socket at %s: %s", errDaemon, c.socket, hint)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing accepts connections on %s (stopped or restarting): %s", errDaemon, c.socket, hint)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: permission denied on %s: this user (uid %d) may not connect; the socket's group and mode are lastmiled's socket_group and socket_mode (ask the host's operator)", errDaemon, c.socket, os.Getuid())
	}
	return fmt.Errorf("%w: %s: %v", errDaemon, c.socket, err)
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

func (c *apiClient) status(ctx context.Context) (*apiStatus, error) {
	var st apiStatus
	_, err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return &st, err
}

func (c *apiClient) jobs(ctx context.Context) ([]apiJob, error) {
	var out struct {
		Jobs []apiJob `json:"jobs"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &out)
	return out.Jobs, err
}

func (c *apiClient) job(ctx context.Context, id string) (*apiJob, error) {
	var j apiJob
	_, err := c.do(ctx, http.MethodGet, jobPath(id), nil, &j)
	return &j, err
}

func (c *apiClient) cancel(ctx context.Context, id string) (*apiJob, error) {
	var j apiJob
	_, err := c.do(ctx, http.MethodDelete, jobPath(id), nil, &j)
	return &j, err
}

// submit returns the job as the daemon sent it and whether it was created
// (201) rather than joined (200).
func (c *apiClient) submit(ctx context.Context, req submitRequest) (json.RawMessage, bool, error) {
	var raw json.RawMessage
	status, err := c.do(ctx, http.MethodPost, "/v1/jobs", req, &raw)
	return raw, status == http.StatusCreated, err
}
