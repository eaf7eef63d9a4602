// Command lastmiled is lastmile's per-host daemon: trainers on the host ask
// it for data over a unix socket, and it decodes, batches and hands them
// their batches through shared-memory rings. It is a systemd Type=notify
// service; docs/daemon.md is its manual and docs/control-api.md its API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/lastmile/lastmile/daemon"
)

// version is stamped by the Makefile with -ldflags -X main.version=...
var version = "dev"

const defaultConfig = "/etc/lastmile/lastmiled.yaml"

const usage = `usage: lastmiled [flags]

lastmiled is lastmile's per-host data service, run by systemd
(lastmiled.service, Type=notify). Trainers on the host ask it for data over
a unix socket (the lastmile CLI, lastmile.Dataset in Python); it decodes
their Parquet inputs, runs the last-mile ops of their job specs, shares the
CPUs between jobs by weight, and hands each trainer rank its batches
through a shared-memory ring. Its jobs and rings survive its restarts.

Configuration: ` + defaultConfig + ` (every key optional; a missing
default file means all defaults; deploy/lastmiled.yaml lists them). Flags
override the file; -check-config prints the result. SIGHUP reloads it,
SIGTERM drains and stops.

Manual, in lastmile's source tree: docs/daemon.md (configuration,
signals, restarts, metrics), docs/daemon-usage.md (installation, use),
docs/control-api.md (the API), docs/top.md (lastmile top).

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line; each overrides the config file's field.
type flags struct {
	fs                                                             *flag.FlagSet
	config                                                         string
	socket, stateDir, shmDir, metrics, metricsToken, level, format string
	socketMode, socketGroup, adminGroup                            string
	workers                                                        int
	grace, drain                                                   daemon.Duration
	memTotal, memPerJob                                            daemon.Bytes
	version, check                                                 bool
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{fs: flag.NewFlagSet("lastmiled", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", defaultConfig, "YAML configuration file (a missing default file means all defaults)")
	fs.StringVar(&f.socket, "socket", "", "control API unix socket (default /run/lastmile/lastmiled.sock)")
	fs.StringVar(&f.socketMode, "socket-mode", "", "socket permission bits, octal (default 0660)")
	fs.StringVar(&f.socketGroup, "socket-group", "", "group of the socket file")
	fs.StringVar(&f.adminGroup, "admin-group", "", "group whose members see and cancel every job")
	fs.StringVar(&f.stateDir, "state-dir", "", "directory of persisted job state (default /var/lib/lastmile)")
	fs.StringVar(&f.shmDir, "shm-dir", "", "directory of the rings (default $LASTMILE_SHM_DIR or /dev/shm)")
	fs.StringVar(&f.metrics, "metrics", "", `Prometheus /metrics address, or "off" (default 127.0.0.1:9464)`)
	fs.StringVar(&f.metricsToken, "metrics-token-file", "", "file of the bearer token a scrape sends to get the jobs' series (default: the daemon's own series only)")
	fs.IntVar(&f.workers, "workers", 0, "decode tokens shared by all jobs (default: the CPUs available)")
	fs.Var(&f.grace, "grace", "keep rings nobody attaches to this long (default 10m)")
	fs.Var(&f.drain, "drain-timeout", "graceful stop bound (default 30s)")
	fs.Var(&f.memTotal, "memory-total", "memory budget of all jobs, e.g. 32GiB (default: half the memory)")
	fs.Var(&f.memPerJob, "memory-per-job", "memory budget of one job, e.g. 8GiB (default: none)")
	fs.StringVar(&f.level, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&f.format, "log-format", "", "text or json (default text)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.BoolVar(&f.check, "check-config", false, "check the configuration, print it and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return f, nil
}

// load reads the config file, applies the flags that were given and
// checks the result.
func (f *flags) load() (daemon.Config, error) {
	cfg, err := f.read()
	if err != nil {
		if _, io := errors.AsType[*fs.PathError](err); io {
			return cfg, err
		}
		// The file was read but has mistakes (unknown keys, wrong
		// types): report its values out of range with them, every
		// mistake at once (docs/daemon.md, "Configuration").
		return cfg, errors.Join(err, cfg.Validate())
	}
	return cfg, cfg.Validate()
}

// read reads the config file and applies the flags that were given,
// without checking the values: a reload checks what it will apply
// (daemon.Reload), so that a key that needs a restart, invalid as
// written, does not hold back the keys that reload.
func (f *flags) read() (daemon.Config, error) {
	cfg, err := daemon.LoadConfig(f.config, f.config == defaultConfig)
	if _, io := errors.AsType[*fs.PathError](err); io {
		return cfg, err
	}
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "socket":
			cfg.SetByFlag("socket", "-socket")
			cfg.Socket = f.socket
		case "socket-mode":
			cfg.SetByFlag("socket_mode", "-socket-mode")
			cfg.SocketMode = f.socketMode
		case "socket-group":
			cfg.SetByFlag("socket_group", "-socket-group")
			cfg.SocketGroup = f.socketGroup
		case "admin-group":
			cfg.SetByFlag("admin_group", "-admin-group")
			cfg.AdminGroup = f.adminGroup
		case "state-dir":
			cfg.SetByFlag("state_dir", "-state-dir")
			cfg.StateDir = f.stateDir
		case "shm-dir":
			cfg.SetByFlag("shm_dir", "-shm-dir")
			cfg.ShmDir = f.shmDir
		case "metrics":
			cfg.SetByFlag("metrics", "-metrics")
			cfg.Metrics = f.metrics
		case "metrics-token-file":
			cfg.SetByFlag("metrics_token_file", "-metrics-token-file")
			cfg.MetricsTokenFile = f.metricsToken
		case "workers":
			cfg.SetByFlag("workers", "-workers")
			cfg.Workers = f.workers
		case "grace":
			cfg.SetByFlag("grace", "-grace")
			cfg.Grace = f.grace
		case "drain-timeout":
			cfg.SetByFlag("drain_timeout", "-drain-timeout")
			cfg.DrainTimeout = f.drain
		case "memory-total":
			cfg.SetByFlag("memory.total", "-memory-total")
			cfg.Memory.Total = f.memTotal
		case "memory-per-job":
			cfg.SetByFlag("memory.per_job", "-memory-per-job")
			cfg.Memory.PerJob = f.memPerJob
		case "log-level":
			cfg.SetByFlag("log.level", "-log-level")
			cfg.Log.Level = f.level
		case "log-format":
			cfg.SetByFlag("log.format", "-log-format")
			cfg.Log.Format = f.format
		}
	})
	return cfg, err // the file's mistakes, if any: the flags are applied all the same
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "lastmiled:", err)
		return 2
	}
	if f.version {
		fmt.Fprintln(stdout, "lastmiled", version)
		return 0
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(stderr, "lastmiled:", err)
		return 2
	}
	if f.check {
		if err := cfg.CheckFiles(); err != nil {
			fmt.Fprintln(stderr, "lastmiled:", err)
			return 2
		}
		out, err := cfg.Marshal()
		if err != nil {
			fmt.Fprintln(stderr, "lastmiled:", err)
			return 1
		}
		fmt.Fprintf(stdout, "# configuration OK\n%s", out)
		return 0
	}
	level := new(slog.LevelVar)
	lvl, _ := levelOf(cfg.Log.Level)
	level.Set(lvl)
	var h slog.Handler
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	} else {
		h = slog.NewTextHandler(stderr, opts)
	}
	log := slog.New(h)

	// Signals first, so that one arriving during start-up is not lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	d, err := daemon.New(cfg, log, level, version, notify(log))
	if err != nil {
		log.Error("bad configuration", "err", err)
		return 2
	}
	if err := d.Start(); err != nil {
		log.Error("start", "err", err)
		return 1
	}
	notify(log)("READY=1")
	log.Info("ready", "pid", os.Getpid())
	stopWatchdog := watchdog(d, log)
	defer stopWatchdog()

	for sig := range sigs {
		if sig == syscall.SIGHUP {
			reload(d, f, log)
			continue
		}
		return drain(d, sig, sigs, log)
	}
	return 0
}

// drain stops gracefully within the configured timeout; a second SIGTERM
// or SIGINT cuts it short. The rings stay resumable either way.
func drain(d *daemon.Daemon, sig os.Signal, sigs <-chan os.Signal, log *slog.Logger) int {
	timeout := d.Config().DrainTimeout.D()
	log.Info("stopping", "signal", sig.String(), "drain_timeout", timeout)
	notify(log)("STOPPING=1")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Drain(ctx) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Error("drain incomplete; rings are left as after a crash, which the next start adopts", "err", err)
				return 1
			}
			log.Info("stopped")
			return 0
		case s := <-sigs:
			if s == syscall.SIGHUP {
				continue
			}
			log.Warn("second signal: stopping now; rings are left as after a crash, which the next start adopts", "signal", s.String())
			return 1
		}
	}
}

func reload(d *daemon.Daemon, f *flags, log *slog.Logger) {
	cfg, err := f.read()
	if err != nil {
		log.Error("SIGHUP: configuration not reloaded", "err", err)
		d.ReloadCertificates() // renewed in place: taken whatever the config file says
		return
	}
	ignored, err := d.Reload(cfg)
	if err != nil {
		log.Error("SIGHUP: configuration not reloaded", "err", err)
		return
	}
	if len(ignored) > 0 {
		log.Warn("SIGHUP: these settings changed but need a restart", "fields", strings.Join(ignored, ","))
	}
}

// notify sends a state string to systemd; without NOTIFY_SOCKET (not
// under systemd) it does nothing.
func notify(log *slog.Logger) func(string) {
	return func(state string) {
		if _, err := sd.SdNotify(false, state); err != nil {
			log.Debug("sd_notify", "state", state, "err", err)
		}
	}
}

// watchdog pings systemd at half of WATCHDOG_USEC while the daemon's own
// locks can be taken (a deadlocked daemon stops pinging and is restarted).
func watchdog(d *daemon.Daemon, log *slog.Logger) func() {
	every, err := sd.SdWatchdogEnabled(false)
	if err != nil || every <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(every / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if d.Healthy(every / 2) {
					notify(log)("WATCHDOG=1")
				} else {
					log.Error("watchdog: daemon unresponsive; not pinging systemd")
				}
			}
		}
	}()
	return func() { close(stop) }
}

func levelOf(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}
