package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The control socket's bounds (config control.*, docs/control-api.md):
//
//   - connections: at most max_conns open in all and max_conns_per_uid per
//     uid, counted from accept to close, and none that would leave fewer
//     than fd_reserve descriptors free under the open-file limit (the
//     daemon's own work: job state, inputs, rings, peers). Go serves each
//     connection on its own goroutine, so an idle connection blocks no
//     other client by itself; what runs out is file descriptors and memory,
//     and the per-uid bound keeps one user from taking them all. A
//     connection over a bound is answered 429 (its uid's bound) or 503
//     (the total, the reserve) and closed, without reaching the API.
//     Admins have no per-uid bound, 16 connections past max_conns and half
//     of the reserve, so their status and cancel get through a flood;
//   - time: a connection must finish its request's headers within
//     read_header_timeout of connecting (or of the first byte of its next
//     request), its body within body_timeout, and must read the response
//     within body_timeout of the daemon starting it; a kept-alive
//     connection with no request is closed after idle_timeout. There is no
//     whole-request timeout: attach legitimately waits up to 600 s;
//   - size: headers of at most max_header_bytes (431), bodies of at most
//     max_body (413, refused from Content-Length before reading any of it,
//     or after max_body bytes of a body without one).

// maxRefusing bounds the refusals being answered at once; beyond it a
// connection over a bound is closed without an answer. adminConns is how
// far past max_conns admins may go.
const (
	maxRefusing = 64
	adminConns  = 16
)

// controlServer returns the control API's server and the listener it must
// serve, which bounds connections.
func (d *Daemon) controlServer(cfg Config, ln net.Listener) (*http.Server, net.Listener) {
	cc := cfg.Control
	lim := &connLimiter{Listener: ln, limits: func() ControlConfig { return d.Config().Control }, admin: d.isAdmin,
		log: d.log, byUID: map[int64]int{}}
	srv := &http.Server{
		Handler:           d.api(),
		ConnContext:       connContext,
		ReadHeaderTimeout: cc.ReadHeaderTimeout.D(),
		IdleTimeout:       cc.IdleTimeout.D(),
		MaxHeaderBytes:    int(cc.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	return srv, lim
}

// controlRestart lists the control settings that only a restart applies
// (the http.Server holds them) and puts their old values back into cfg.
func controlRestart(old Config, cfg *Config) []string {
	var names []string
	o, c := old.Control, &cfg.Control
	if c.ReadHeaderTimeout != o.ReadHeaderTimeout {
		names = append(names, "control.read_header_timeout")
	}
	if c.IdleTimeout != o.IdleTimeout {
		names = append(names, "control.idle_timeout")
	}
	if c.MaxHeaderBytes != o.MaxHeaderBytes {
		names = append(names, "control.max_header_bytes")
	}
	c.ReadHeaderTimeout, c.IdleTimeout, c.MaxHeaderBytes = o.ReadHeaderTimeout, o.IdleTimeout, o.MaxHeaderBytes
	return names
}

// controlConns returns the control connections open now, this one
// included.
func (d *Daemon) controlConns() int {
	l, ok := d.ln.(*connLimiter)
	if !ok {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// connContext is the http.Server's ConnContext: the peer was read at
// accept.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok {
		return context.WithValue(ctx, peerKey{}, cc.p)
	}
	return peerContext(ctx, c)
}

// bounded bounds each request's body (size and time) and the time the
// client takes to read the response.
func (d *Daemon) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc := d.Config().Control
		rc := http.NewResponseController(w)
		// Not supported off a real connection (tests): nothing to bound.
		_ = rc.SetReadDeadline(time.Now().Add(cc.BodyTimeout.D()))
		limit := int64(cc.MaxBody)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/counts") {
			// A count for every unit of a job's plan: 100,000s of units
			// outgrow a spec's limit. Only the job's owner may post it.
			limit = maxBody
		}
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			writeError(w, bodyTooLarge(limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, d: cc.BodyTimeout.D()}, r)
	})
}

func bodyTooLarge(limit int64) *apiError {
	return errorf(http.StatusRequestEntityTooLarge,
		"request body over %d bytes (%s, config control.max_body): send a smaller spec (inputs as directories or globs rather than listed files)",
		limit, Bytes(limit))
}

// bodyRead ends the body's deadline once the body is read: a handler may
// then wait (attach, up to 600 s), and a deadline on the connection's
// background read would cancel its context.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// deadlineWriter gives the client d to read the response from its start.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	d       time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) WriteHeader(status int) {
	w.start()
	w.ResponseWriter.WriteHeader(status)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connLimiter is the control socket's listener: it counts open
// connections in all and per uid, and answers those over a bound itself.
type connLimiter struct {
	net.Listener
	limits   func() ControlConfig
	admin    func(peer) bool
	fds      fdGauge
	log      *slog.Logger
	mu       sync.Mutex
	total    int
	byUID    map[int64]int // uid, or -1 for a peer without credentials
	refusing atomic.Int32
	lastLog  atomic.Int64 // unix seconds of the last refusal logged
}

// Accept returns the next connection within the bounds.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := peerFrom(peerContext(context.Background(), c))
		status, msg := l.admit(p)
		if status == 0 {
			return &countedConn{Conn: c, l: l, p: p}, nil
		}
		l.refuse(c, status, msg)
	}
}

func uidKey(p peer) int64 {
	if !p.ok {
		return -1
	}
	return int64(p.uid)
}

// admit counts a new connection of p, or says why it is over a bound.
// Admins (root, the admin group) are held to no per-uid bound, may go
// adminConns past max_conns, and may use half of the descriptor reserve:
// their status and cancel get through a flood of other users'
// connections.
func (l *connLimiter) admit(p peer) (int, string) {
	cc := l.limits()
	open, limit := l.fds.usage()
	l.mu.Lock()
	defer l.mu.Unlock()
	key := uidKey(p)
	perUID := l.byUID[key] >= cc.MaxConnsPerUID
	total := l.total >= cc.MaxConns
	fds := limit > 0 && open+1 > limit-cc.FDReserve
	if (perUID || total || fds) && p.ok && l.admin(p) {
		perUID = false
		total = l.total >= cc.MaxConns+adminConns
		fds = limit > 0 && open+1 > limit-cc.FDReserve/2
	}
	switch {
	case perUID:
		return http.StatusTooManyRequests, fmt.Sprintf(
			"uid %d has %d control connections open, the most one user may (config control.max_conns_per_uid): close idle clients, or reuse one connection",
			p.uid, l.byUID[key])
	case total:
		return http.StatusServiceUnavailable, fmt.Sprintf(
			"lastmiled has %d control connections open, its limit (config control.max_conns): retry shortly", l.total)
	case fds:
		return http.StatusServiceUnavailable, fmt.Sprintf(
			"lastmiled has %d of its %d file descriptors open and keeps %d for its own work (config control.fd_reserve): retry shortly; an operator can raise LimitNOFILE",
			open, limit, cc.FDReserve)
	}
	l.total++
	l.byUID[key]++
	l.fds.admit()
	return 0, ""
}

func (l *connLimiter) release(p peer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := uidKey(p)
	l.total--
	if l.byUID[key]--; l.byUID[key] <= 0 {
		delete(l.byUID, key)
	}
}

// refuse answers a connection over a bound with an HTTP error and closes
// it, within a second, off the accept loop.
func (l *connLimiter) refuse(c net.Conn, status int, msg string) {
	if now := time.Now().Unix(); l.lastLog.Swap(now) != now {
		l.log.Warn("control connection refused", "status", status, "reason", msg)
	}
	if n := l.refusing.Add(1); n > maxRefusing || int(n) > l.limits().FDReserve/4 {
		l.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		// Read the request's head first: a client whose request is still
		// unread when the socket closes may get an error for its write
		// instead of this answer.
		readHead(c)
		body, _ := json.Marshal(map[string]string{"error": msg})
		retry := ""
		if status == http.StatusServiceUnavailable {
			retry = "Retry-After: 1\r\n"
		}
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%sConnection: close\r\nContent-Length: %d\r\n\r\n%s\n",
			status, http.StatusText(status), retry, len(body)+1, body)
	}()
}

// readHead reads up to the end of an HTTP request's headers, at most 16 KiB.
func readHead(c net.Conn) {
	var buf [16 << 10]byte
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil || bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
			return
		}
	}
}

// countedConn is an admitted connection; closing it frees its place.
type countedConn struct {
	net.Conn
	l    *connLimiter
	p    peer
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.release(c.p) })
	return c.Conn.Close()
}
