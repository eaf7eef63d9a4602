package s3test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what a Proxy does to one request instead of passing it on
// untouched.
type Fault int

const (
	Pass      Fault = iota // forward
	Status503              // answer 503 SlowDown without forwarding
	Hang                   // hold the request for HangFor, then forward
	Truncate               // forward, but cut the body after half its bytes
)

// Proxy is a reverse proxy in front of a Server that counts requests and
// response body bytes and injects faults chosen per request by Faults.
type Proxy struct {
	URL string // http://127.0.0.1:port

	faults   atomic.Pointer[func(n int64, r *http.Request) Fault]
	hangFor  atomic.Int64 // nanoseconds; 0 is 10s
	requests atomic.Int64
	bytes    atomic.Int64
	mu       sync.Mutex
	log      []string // "METHOD path range"
	srv      *http.Server
	l        net.Listener
}

// NewProxy starts a proxy on a loopback port in front of target.
func NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), l: l}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // cut bodies are on purpose
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &countBody{ReadCloser: resp.Body, n: &p.bytes, cut: -1}
		if f, _ := resp.Request.Context().Value(faultKey{}).(Fault); f == Truncate && resp.ContentLength > 1 {
			resp.Body.(*countBody).cut = resp.ContentLength / 2
		}
		return nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.requests.Add(1)
		p.mu.Lock()
		p.log = append(p.log, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Range")))
		p.mu.Unlock()
		f := Pass
		if fn := p.faults.Load(); fn != nil {
			f = (*fn)(n, r)
		}
		switch f {
		case Status503:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		case Hang:
			d := time.Duration(p.hangFor.Load())
			if d == 0 {
				d = 10 * time.Second
			}
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, f)))
	})}
	go p.srv.Serve(l)
	return p, nil
}

type faultKey struct{}

// SetFaults makes fn pick each request's fault (n counts requests from 1
// since the last Reset); nil passes every request on.
func (p *Proxy) SetFaults(fn func(n int64, r *http.Request) Fault) {
	if fn == nil {
		p.faults.Store(nil)
		return
	}
	p.faults.Store(&fn)
}

// SetHang sets how long a Hang fault holds a request (0: 10s).
func (p *Proxy) SetHang(d time.Duration) { p.hangFor.Store(int64(d)) }

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// Requests returns the requests seen since the last Reset.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Bytes returns the response body bytes passed on since the last Reset.
func (p *Proxy) Bytes() int64 { return p.bytes.Load() }

// Log returns "METHOD path range" of each request since the last Reset.
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// Reset zeroes the counters and the log.
func (p *Proxy) Reset() {
	p.requests.Store(0)
	p.bytes.Store(0)
	p.mu.Lock()
	p.log = nil
	p.mu.Unlock()
}

// GETs returns how many GET requests of the log name path suffix.
func (p *Proxy) GETs(suffix string) int {
	n := 0
	for _, l := range p.Log() {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "GET" && strings.HasSuffix(f[1], suffix) {
			n++
		}
	}
	return n
}

// countBody counts bytes read and, with cut >= 0, ends the body (with an
// error, so the connection is dropped) after cut bytes.
type countBody struct {
	io.ReadCloser
	n    *atomic.Int64
	read int64
	cut  int64
}

func (b *countBody) Read(p []byte) (int, error) {
	if b.cut >= 0 {
		if b.read >= b.cut {
			return 0, io.ErrUnexpectedEOF
		}
		p = p[:min(int64(len(p)), b.cut-b.read)]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	b.n.Add(int64(n))
	return n, err
}
