package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/lastmile/lastmile/cpus"
	cpupeer "github.com/lastmile/lastmile/peer"
	"github.com/lastmile/lastmile/shm"
	"github.com/lastmile/lastmile/spec"
)

// Config is lastmiled's configuration: a YAML file (every field optional)
// over DefaultConfig, then flags over that.
type Config struct {
	// Socket is the control API's unix socket. Default
	// /run/lastmile/lastmiled.sock.
	Socket string `yaml:"socket"`
	// SocketMode is the socket file's permission bits, octal. Default
	// "0660": the owner and SocketGroup may submit jobs.
	SocketMode string `yaml:"socket_mode"`
	// SocketGroup, if set, is the group name (or gid) the socket is
	// chowned to.
	SocketGroup string `yaml:"socket_group"`
	// AdminGroup, if set, names a group whose members see and may cancel
	// every job, as root does.
	AdminGroup string `yaml:"admin_group"`
	// StateDir holds the jobs' persisted state. Default /var/lib/lastmile.
	StateDir string `yaml:"state_dir"`
	// ShmDir is where rings are created. Default $LASTMILE_SHM_DIR or
	// /dev/shm.
	ShmDir string `yaml:"shm_dir"`
	// Metrics is the TCP address of the Prometheus /metrics endpoint;
	// "off" disables it. Default 127.0.0.1:9464.
	Metrics string `yaml:"metrics"`
	// MetricsTokenFile, if set, holds the bearer token a scrape must send
	// (Authorization: Bearer TOKEN) to get the jobs' series: any local
	// user can reach the endpoint, and a job's series say what its
	// submitter's files hold (rows, a filter's selectivity). Without it,
	// and to a scrape without the header, /metrics serves the daemon's
	// own series only (docs/daemon.md, "Metrics").
	MetricsTokenFile string `yaml:"metrics_token_file"`
	// Workers is the number of decode tokens all jobs share (CPUs).
	// Default: the CPUs this process may use (cgroup quota, GOMAXPROCS).
	Workers int `yaml:"workers"`
	// Memory bounds the rings plus in-flight units of each job and of all.
	Memory MemoryConfig `yaml:"memory"`
	// Grace is how long the rings of a job nobody attaches to are kept
	// before the job is canceled and its rings removed; also how long a
	// finished job's rings and record are kept. Default 10m.
	Grace Duration `yaml:"grace"`
	// DrainTimeout bounds the graceful stop on SIGTERM. Default 30s.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// DefaultWeight is the CPU weight of a job that asks for none.
	// Default 1.
	DefaultWeight int `yaml:"default_weight"`
	// Weights overrides the weight of jobs by name.
	Weights map[string]int `yaml:"weights"`
	// Control bounds the control API's connections and requests.
	Control ControlConfig `yaml:"control"`
	// Limits bounds what one user may hold.
	Limits LimitsConfig `yaml:"limits"`
	// Log configures logging.
	Log LogConfig `yaml:"log"`
	// Roots name the data directories that peers agree on: a file under
	// one is named to peers as ROOT/REL (docs/peers.md).
	Roots map[string]string `yaml:"roots"`
	// Peer makes this daemon a CPU peer of others.
	Peer PeerConfig `yaml:"peer"`
	// Peers are the CPU peers this daemon spills units to.
	Peers PeersConfig `yaml:"peers"`
	// S3 configures reading s3:// inputs with the daemon's credentials,
	// for the users its allow-list names (s3.go, docs/storage.md).
	S3 S3Config `yaml:"s3"`
	// GPU says where NVML is (gpu.go).
	GPU GPUConfig `yaml:"gpu"`

	// file and lines say where the config was read from and the line of
	// each field given there, so that Validate's errors name their line
	// as decoding errors do (nil lines: not from a file).
	file  string
	lines map[string]int
	// flags names the command-line flag that set a field (SetByFlag), so
	// that Validate's error about it names the flag, not the file's line.
	flags map[string]string
}

// SetByFlag records that flag (as typed, "-workers") set field (as
// Validate names it, "memory.total") over the file's value: an error
// about the field then names the flag rather than a line of the file,
// which holds another value, or none.
func (c *Config) SetByFlag(field, flag string) {
	if c.flags == nil {
		c.flags = map[string]string{}
	}
	c.flags[field] = flag
}

// ControlConfig bounds the control socket, so that no client (idle, slow
// or flooding) keeps the others from being served (docs/control-api.md).
type ControlConfig struct {
	// MaxBody is the largest request body. Default 1MiB.
	MaxBody Bytes `yaml:"max_body"`
	// MaxHeaderBytes bounds a request's header lines. Default 64KiB.
	MaxHeaderBytes Bytes `yaml:"max_header_bytes"`
	// ReadHeaderTimeout bounds the time from a new connection (or the
	// first byte of the next request) to the end of its headers. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds reading a request's body. Default 30s.
	BodyTimeout Duration `yaml:"body_timeout"`
	// IdleTimeout closes a kept-alive connection with no request in
	// flight after this long. Default 30s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConns bounds the open connections of all users together.
	// Default 1024.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerUID bounds the open connections of one uid. Default 128.
	MaxConnsPerUID int `yaml:"max_conns_per_uid"`
	// FDReserve is the file descriptors kept for the daemon's own work
	// (job state, input files, rings, peers): a control connection that
	// would leave fewer free under the open-file limit is refused. Admins
	// may use half of the reserve, so that their status and cancel get
	// through. Default 128.
	FDReserve int `yaml:"fd_reserve"`
}

// LimitsConfig bounds what one user (uid) may hold; root and the admin
// group are exempt. 0 means no limit of that kind.
type LimitsConfig struct {
	// JobsPerUser is the most jobs one uid may hold at once (pending,
	// running, or done with rings still in place). Default 16.
	JobsPerUser int `yaml:"jobs_per_user"`
	// MemoryPerUser is the most memory (rings plus in-flight units) one
	// uid's jobs may hold together. Default 0: only memory.total.
	MemoryPerUser Bytes `yaml:"memory_per_user"`
}

// MemoryConfig bounds memory; 0 means no limit of that kind.
type MemoryConfig struct {
	// PerJob is the most one job may hold. Default 0 (only Total).
	PerJob Bytes `yaml:"per_job"`
	// Total is the most all jobs together may hold. Default: half the
	// memory this process may use (cgroup memory.max, else MemTotal).
	Total Bytes `yaml:"total"`
}

// LogConfig configures the logger.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is "text" or "json" (slog handlers; both fit journald).
	// Default text.
	Format string `yaml:"format"`
}

// DefaultConfig returns the configuration used where the file and flags
// say nothing.
func DefaultConfig() Config {
	return Config{
		Socket:        "/run/lastmile/lastmiled.sock",
		SocketMode:    "0660",
		StateDir:      "/var/lib/lastmile",
		ShmDir:        shm.DefaultDir(),
		Metrics:       "127.0.0.1:9464",
		Workers:       cpus.Available(),
		Memory:        MemoryConfig{Total: Bytes(defaultTotalMemory())},
		Grace:         Duration(10 * time.Minute),
		DrainTimeout:  Duration(30 * time.Second),
		DefaultWeight: 1,
		Control: ControlConfig{
			MaxBody: 1 << 20, MaxHeaderBytes: 64 << 10, ReadHeaderTimeout: Duration(10 * time.Second),
			BodyTimeout: Duration(30 * time.Second), IdleTimeout: Duration(30 * time.Second),
			MaxConns: 1024, MaxConnsPerUID: 128, FDReserve: 128,
		},
		Limits: LimitsConfig{JobsPerUser: 16},
		Log:    LogConfig{Level: "info", Format: "text"},
		Peer:   PeerConfig{MaxMemory: 1 << 30},
		Peers: PeersConfig{Resolve: Duration(30 * time.Second), Credits: 4, RecvSecondsPerGB: 1.5, Spill: "auto",
			Deadline: Duration(10 * time.Second), Verify: cpupeer.DefaultVerify},
		S3: S3Config{RequestTimeout: Duration(30 * time.Second), Retries: 5, PrefetchBytes: 256 << 20},
	}
}

// ParseConfig reads a YAML configuration over DefaultConfig. Unknown
// fields are errors, so a typo is not silently ignored.
func ParseConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return DefaultConfig(), fmt.Errorf("read config: %w", err)
	}
	return parseConfig("", data)
}

// parseConfig decodes data, read from file ("" if not from a file), over
// DefaultConfig as a job spec is decoded (spec.DecodeFile): every mistake
// is reported, as FILE:LINE: key.path: problem (spec.Errors); an unknown
// key with the nearest known one and the section's keys.
func parseConfig(file string, data []byte) (Config, error) {
	c := DefaultConfig()
	lines, err := spec.DecodeFileLines(file, data, &c)
	c.file, c.lines = file, lines
	return c, err
}

// LoadConfig reads the file at path over DefaultConfig. A missing file is
// not an error when missingOK (the default path need not exist).
func LoadConfig(path string, missingOK bool) (Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && missingOK {
		return DefaultConfig(), nil
	}
	if err != nil {
		return DefaultConfig(), fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return DefaultConfig(), fmt.Errorf("config: %w", err)
	}
	return parseConfig(path, data) // its errors name path and their lines
}

// ConfigError names the configuration field that is wrong, and where it
// was given: File and Line, or those of the nearest section above it
// that was (0: the field took its default).
type ConfigError struct {
	File  string
	Line  int
	Flag  string // the command-line flag that gave the value, if one did (then no File or Line)
	Field string
	Value any
	Err   error
}

func (e *ConfigError) Error() string {
	msg := fmt.Sprintf("config %s = %v: %v", e.Field, e.Value, e.Err)
	switch {
	case e.Flag != "":
		return fmt.Sprintf("flag %s: %s", e.Flag, msg)
	case e.Line > 0 && e.File != "":
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, msg)
	}
	return msg
}

// Values is c without where it was read from: what two configs are
// compared by.
func (c Config) Values() Config {
	c.file, c.lines = "", nil
	return c
}

// lineOf is the line where field, or the nearest section holding it,
// was given; 0 if none was.
func (c *Config) lineOf(field string) int {
	for f := field; f != ""; {
		if n, ok := c.lines[f]; ok {
			return n
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return 0
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks every field and returns the problems, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, v any, format string, args ...any) {
		if fl, ok := c.flags[field]; ok {
			errs = append(errs, &ConfigError{Flag: fl, Field: field, Value: v, Err: fmt.Errorf(format, args...)})
			return
		}
		errs = append(errs, &ConfigError{File: c.file, Line: c.lineOf(field), Field: field, Value: v, Err: fmt.Errorf(format, args...)})
	}
	if c.Socket == "" || !strings.HasPrefix(c.Socket, "/") {
		bad("socket", c.Socket, "want an absolute path")
	}
	if _, err := parseMode(c.SocketMode); err != nil {
		bad("socket_mode", c.SocketMode, "%v", err)
	}
	if c.SocketGroup != "" {
		if _, err := lookupGroup(c.SocketGroup); err != nil {
			bad("socket_group", c.SocketGroup, "%v", err)
		}
	}
	if c.AdminGroup != "" {
		if _, err := lookupGroup(c.AdminGroup); err != nil {
			bad("admin_group", c.AdminGroup, "%v", err)
		}
	}
	if !strings.HasPrefix(c.StateDir, "/") {
		bad("state_dir", c.StateDir, "want an absolute path")
	}
	if !strings.HasPrefix(c.ShmDir, "/") {
		bad("shm_dir", c.ShmDir, "want an absolute path")
	}
	if c.Metrics == "" {
		bad("metrics", c.Metrics, `want host:port, or "off"`)
	}
	if c.MetricsTokenFile != "" {
		if _, err := readToken(c.MetricsTokenFile); err != nil {
			bad("metrics_token_file", c.MetricsTokenFile, "%v", err)
		}
	}
	if c.Workers < 1 || c.Workers > 4096 {
		bad("workers", c.Workers, "want 1 to 4096")
	}
	if c.Memory.PerJob < 0 {
		bad("memory.per_job", c.Memory.PerJob, "want 0 (no limit) or a size such as 8GiB")
	}
	if c.Memory.Total < 0 {
		bad("memory.total", c.Memory.Total, "want 0 (no limit) or a size such as 32GiB")
	}
	if c.Grace < Duration(time.Second) {
		bad("grace", c.Grace, "want at least 1s")
	}
	if c.DrainTimeout < Duration(100*time.Millisecond) {
		bad("drain_timeout", c.DrainTimeout, "want at least 100ms")
	}
	if c.DefaultWeight < 1 || c.DefaultWeight > MaxWeight {
		bad("default_weight", c.DefaultWeight, "want 1 to %d", MaxWeight)
	}
	for name, w := range c.Weights {
		if w < 1 || w > MaxWeight {
			bad("weights."+name, w, "want 1 to %d", MaxWeight)
		}
	}
	c.validateBounds(bad)
	c.validatePeers(bad)
	c.validateS3(bad)
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level", c.Log.Level, "%v", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", c.Log.Format, "want text or json")
	}
	return errors.Join(errs...)
}

// validateBounds checks the control and limits sections.
func (c *Config) validateBounds(bad func(field string, v any, format string, args ...any)) {
	cc := c.Control
	if cc.MaxBody < 1<<10 || cc.MaxBody > maxBody {
		bad("control.max_body", cc.MaxBody, "want 1KiB to %s", Bytes(maxBody))
	}
	if cc.MaxHeaderBytes < 4<<10 || cc.MaxHeaderBytes > 1<<20 {
		bad("control.max_header_bytes", cc.MaxHeaderBytes, "want 4KiB to 1MiB")
	}
	for _, t := range []struct {
		field string
		v     Duration
	}{{"control.read_header_timeout", cc.ReadHeaderTimeout}, {"control.body_timeout", cc.BodyTimeout}, {"control.idle_timeout", cc.IdleTimeout}} {
		if t.v < Duration(10*time.Millisecond) || t.v > Duration(time.Hour) {
			bad(t.field, t.v, "want 10ms to 1h")
		}
	}
	if cc.MaxConns < 1 || cc.MaxConns > 1<<20 {
		bad("control.max_conns", cc.MaxConns, "want 1 to 1048576")
	}
	if cc.MaxConnsPerUID < 1 || cc.MaxConnsPerUID > cc.MaxConns {
		bad("control.max_conns_per_uid", cc.MaxConnsPerUID, "want 1 to control.max_conns (%d)", cc.MaxConns)
	}
	if cc.FDReserve < 16 || cc.FDReserve > 1<<20 {
		bad("control.fd_reserve", cc.FDReserve, "want 16 to 1048576")
	}
	if c.Limits.JobsPerUser < 0 {
		bad("limits.jobs_per_user", c.Limits.JobsPerUser, "want 0 (no limit) or more")
	}
	if c.Limits.MemoryPerUser < 0 {
		bad("limits.memory_per_user", c.Limits.MemoryPerUser, "want 0 (no limit) or a size such as 16GiB")
	}
}

// MaxWeight is the largest CPU weight of a job.
const MaxWeight = 1000

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, errors.New("want debug, info, warn or error")
	}
	return l, nil
}

func parseMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 || !strings.HasPrefix(s, "0") {
		return 0, fmt.Errorf("want octal permission bits such as \"0660\"")
	}
	return os.FileMode(m), nil
}

// lookupGroup resolves a group name or numeric gid.
func lookupGroup(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(n), err
}

// Bytes is a byte count written as a number or with a unit ("8GiB").
type Bytes int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	if err := b.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// DecodeNode implements spec.NodeDecoder: lastmiled's config is decoded
// as a job spec is.
func (b *Bytes) DecodeNode(d *spec.Decoder, n *yaml.Node, path string) {
	decodeScalar(d, n, path, "a size such as 4096, 512KiB or 64MiB", b.Set)
}

// Set implements flag.Value.
func (b *Bytes) Set(s string) error {
	v, err := spec.ParseSize(s)
	if err != nil {
		return err
	}
	*b = Bytes(v)
	return nil
}

func (b Bytes) String() string { return spec.Size(b).String() }

// MarshalYAML implements yaml.Marshaler.
func (b Bytes) MarshalYAML() (any, error) { return b.String(), nil }

// Duration is a time.Duration written as "10m", "30s".
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if err := d.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// DecodeNode implements spec.NodeDecoder.
func (d *Duration) DecodeNode(dec *spec.Decoder, n *yaml.Node, path string) {
	decodeScalar(dec, n, path, "a duration such as 30s or 10m", d.Set)
}

// decodeScalar decodes the scalar n with set, recording its error (or, for
// a mapping or list, that it wants a scalar such as what) at path.
func decodeScalar(d *spec.Decoder, n *yaml.Node, path, what string, set func(string) error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.Errorf(n, path, "want %s, got a mapping or list", what)
		return
	}
	if err := set(n.Value); err != nil {
		d.Errorf(n, path, "%v", err)
	}
}

// Set implements flag.Value.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s or 10m, got %q", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Marshal renders the configuration as YAML (-check-config).
func (c Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// defaultTotalMemory is half of what this process may use: the cgroup v2
// memory.max if set, else the machine's RAM (sysinfo(2), which needs no
// /proc: systemd's ProcSubset=pid hides /proc/meminfo). 0 (no limit) if
// neither can be read.
func defaultTotalMemory() int64 {
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				if v, err := os.ReadFile("/sys/fs/cgroup" + p + "/memory.max"); err == nil {
					if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 {
						return n / 2
					}
				}
			}
		}
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) / 2
}
