package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/lastmile/lastmile/decode"
)

// Config configures a Client. The zero value reads AWS S3 with the
// standard credential chain, in AWS_REGION (else us-east-1).
type Config struct {
	// Endpoint is the store's URL: "http://127.0.0.1:9000" for MinIO or
	// versitygw, "https://s3.eu-west-1.amazonaws.com"; empty is AWS S3.
	Endpoint string `yaml:"endpoint"`
	// Region is the signing region; empty: AWS_REGION, else us-east-1.
	Region string `yaml:"region"`
	// PathStyle addresses buckets as http://host/bucket/key instead of
	// http://bucket.host/key: what most S3-compatible stores want.
	PathStyle bool `yaml:"path_style"`
	// AccessKey and SecretKey, when set, are static credentials (tests,
	// bench). Empty: the standard chain, in order: AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY; the shared credentials and config files
	// (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_PROFILE,
	// credential_process, SSO); web identity (AWS_WEB_IDENTITY_TOKEN_FILE
	// and AWS_ROLE_ARN); the ECS task role; EC2 instance metadata.
	AccessKey string `yaml:"-"`
	SecretKey string `yaml:"-"`
	// RequestTimeout bounds one attempt of one request; 0 is 30s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Retries is how many times a failed request is retried (throttling,
	// 5xx, timeouts, cut bodies); 0 is 5, negative is none.
	Retries int `yaml:"retries"`
	// RetryBase is the first backoff; it doubles per retry up to 5s, with
	// full jitter. 0 is 100ms.
	RetryBase time.Duration `yaml:"-"`
	// PrefetchBytes bounds the bytes held by prefetched blocks of all the
	// Client's files together; 0 is 256 MiB, negative disables prefetch.
	PrefetchBytes int64 `yaml:"prefetch_bytes"`
	// CoalesceGap: ranges of one unit less than this many bytes apart are
	// fetched by one request (the gap's bytes are fetched too); 0 is 64 KiB.
	CoalesceGap int64 `yaml:"-"`
	// MaxBlock caps one prefetch request; longer ranges are split and
	// fetched in parallel. 0 is 16 MiB.
	MaxBlock int64 `yaml:"-"`
	// Concurrency is how many prefetch requests the Client runs at a
	// time; 0 is 16.
	Concurrency int `yaml:"-"`
	// Transport replaces the HTTP transport (tests count and break
	// requests with it); nil is a tuned clone of http.DefaultTransport.
	Transport http.RoundTripper `yaml:"-"`
}

func (c *Config) defaults() {
	if c.Region == "" {
		c.Region = os.Getenv("AWS_REGION")
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	switch {
	case c.Retries == 0:
		c.Retries = 5
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 100 * time.Millisecond
	}
	if c.PrefetchBytes == 0 {
		c.PrefetchBytes = 256 << 20
	}
	if c.CoalesceGap <= 0 {
		c.CoalesceGap = 64 << 10
	}
	if c.MaxBlock <= 0 {
		c.MaxBlock = 16 << 20
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
}

// Client is a connection pool to one store with one set of credentials,
// a prefetch memory budget and a cache of the objects' versions. It is
// safe for concurrent use. Reads go through a Source.
type Client struct {
	cfg    Config
	core   minio.Core
	budget atomic.Int64 // prefetch bytes still free
	meta   metaCache
	ahead  readAhead // prefetched blocks (prefetch.go)
	stats  clientStats
}

// Stats are a Client's counters since it was made.
type Stats struct {
	Requests int64 // HTTP requests made, retries included
	Retries  int64 // requests that were retries
	Bytes    int64 // object bytes received
}

type clientStats struct{ requests, retries, bytes atomic.Int64 }

// Stats returns the Client's counters.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.stats.requests.Load(), Retries: c.stats.retries.Load(), Bytes: c.stats.bytes.Load()}
}

// New returns a Client for cfg. It makes no request.
func New(cfg Config) (*Client, error) {
	cfg.defaults()
	host, secure := "s3.amazonaws.com", true
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("s3 endpoint %q: want http(s)://host[:port] with no path", cfg.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}, &credentials.IAM{},
	})
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.DisableCompression = true // Parquet is compressed already
		tr = t
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	mc, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region,
		BucketLookup: lookup, Transport: tr, MaxRetries: 1})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	c := &Client{cfg: cfg, core: minio.Core{Client: mc}, meta: metaCache{max: 4096}}
	c.ahead.sem = make(chan struct{}, cfg.Concurrency)
	c.budget.Store(max(cfg.PrefetchBytes, 0))
	return c, nil
}

// Errors, each wrapping the fs error that callers test with errors.Is.
var (
	// ErrNotFound: no such object or bucket (404).
	ErrNotFound = fmt.Errorf("no such object (404): %w", fs.ErrNotExist)
	// ErrDenied: the credentials may not read it (403), or the daemon's
	// allow-list does not give it to the user.
	ErrDenied = fmt.Errorf("access denied: %w", fs.ErrPermission)
	// ErrTruncated: the object is shorter than a read needs.
	ErrTruncated = errors.New("object truncated")
	// errNoRange: the store answered a ranged GET with the whole object;
	// asking again gets the same.
	errNoRange = errors.New("the store ignored the Range header: lastmile needs ranged reads; check the endpoint (a cache or proxy in front of the store may drop Range)")
	// errWrongRange: the store answered a ranged GET with a 206 for
	// another range (its Content-Range says which).
	errWrongRange = errors.New("the store answered another range than the one asked: check the endpoint (a cache or proxy in front of the store may rewrite Range)")
)

// retryable reports whether err is worth another attempt, and err
// described for the caller otherwise.
func classify(obj Object, err error) (retry bool, out error) {
	er := minio.ToErrorResponse(err)
	switch {
	case er.StatusCode == http.StatusNotFound || er.Code == "NoSuchKey" || er.Code == "NoSuchBucket":
		return false, fmt.Errorf("%s: %w (%s): check the bucket and key", obj, ErrNotFound, er.Code)
	case er.StatusCode == http.StatusForbidden || er.Code == "AccessDenied" || er.Code == "InvalidAccessKeyId" || er.Code == "SignatureDoesNotMatch":
		return false, fmt.Errorf("%s: %w (403 %s: %s): check the credentials (the AWS_* environment, ~/.aws, the instance role) and the bucket policy", obj, ErrDenied, er.Code, er.Message)
	case er.StatusCode == http.StatusPreconditionFailed:
		return false, fmt.Errorf("%s: %w: its ETag (or, with no ETag, its Last-Modified) changed since it was planned (412): the object was replaced in the store; submit the job again to read it as it is now", obj, decode.ErrFileChanged)
	case er.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return false, fmt.Errorf("%s: %w: a range past its end (416)", obj, ErrTruncated)
	case er.StatusCode == http.StatusTooManyRequests || er.StatusCode >= 500 || er.Code == "SlowDown" || er.Code == "RequestTimeout":
		return true, fmt.Errorf("%s: %s (%d): %s", obj, er.Code, er.StatusCode, er.Message)
	case er.StatusCode != 0:
		return false, fmt.Errorf("%s: %s (%d): %s", obj, er.Code, er.StatusCode, er.Message)
	case errors.Is(err, ErrTruncated), errors.Is(err, errNoRange), errors.Is(err, errWrongRange), errors.Is(err, decode.ErrFileChanged):
		return false, fmt.Errorf("%s: %w", obj, err)
	}
	// Network errors, attempt timeouts and bodies cut short.
	return true, fmt.Errorf("%s: %w", obj, err)
}

// do runs one request with retries: fn gets a context bounded by the
// attempt timeout. It gives up when ctx is done, at once.
func (c *Client) do(ctx context.Context, obj Object, fn func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			c.stats.retries.Add(1)
		}
		c.stats.requests.Add(1)
		actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		retry, desc := classify(obj, err)
		if !retry {
			return desc
		}
		if attempt >= c.cfg.Retries {
			return fmt.Errorf("%w (gave up after %d attempts; raise s3.retries or s3.request_timeout if the store is slow)", desc, attempt+1)
		}
		d := min(c.cfg.RetryBase<<attempt, 5*time.Second)
		t := time.NewTimer(rand.N(d) + d/4)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// tryAcquire takes n bytes of the prefetch budget if they are free.
func (c *Client) tryAcquire(n int64) bool {
	for {
		free := c.budget.Load()
		if free < n {
			return false
		}
		if c.budget.CompareAndSwap(free, free-n) {
			return true
		}
	}
}

func (c *Client) release(n int64) { c.budget.Add(n) }

// PrefetchInUse returns the bytes prefetched blocks hold now.
func (c *Client) PrefetchInUse() int64 { return max(c.cfg.PrefetchBytes, 0) - c.budget.Load() }

// version is what Open learned of an object: its size, modification
// time and ETag.
type version struct {
	size  int64
	mtime time.Time
	etag  string
}

// same reports whether v and w are one version of an object.
func (v version) same(w version) bool {
	return v.etag == w.etag && v.size == w.size && v.mtime.Equal(w.mtime)
}

// metaCache keeps the versions of recently opened objects, so that
// decoders opening an object planned a moment ago make no request. A stale
// entry is harmless to a job that planned it (reads carry If-Match, and a
// changed object fails), but not to a later job: the Client lives as long
// as the daemon, and an object replaced under the same key would be
// planned with its old size and ETag by every later job. So an entry is
// trusted for metaFresh only, and one whose object answered 412 or 416
// (replaced, or cut short) is dropped at once.
type metaCache struct {
	mu  sync.Mutex
	max int
	m   map[string]metaEntry
}

type metaEntry struct {
	v  version
	at time.Time
}

// metaFresh is how long an object's version is reused without asking the
// store: long enough for a job's planning and its decoders' first opens.
const metaFresh = time.Minute

func (m *metaCache) get(name string) (version, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[name]
	if !ok || time.Since(e.at) > metaFresh {
		return version{}, false
	}
	return e.v, true
}

func (m *metaCache) put(name string, v version) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= m.max {
		m.m = map[string]metaEntry{} // crude, and enough: entries are cheap to refetch
	}
	m.m[name] = metaEntry{v: v, at: time.Now()}
}

// drop forgets name's version if it is still v: the store said the object
// is no longer that version.
func (m *metaCache) drop(name string, v version) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[name]; ok && e.v == v {
		delete(m.m, name)
	}
}
