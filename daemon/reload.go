package daemon

import (
	"slices"
	"strings"
)

// ReloadCertificates reads the peer role's and the spill pool's
// certificate files again (reloadTLS), as Reload does: for a SIGHUP whose
// config file does not load, so that a renewal in place is still taken.
func (d *Daemon) ReloadCertificates() {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.reloadTLS()
}

// Reload applies what can change while running: log level, weights,
// grace, drain timeout, memory limits, workers and the admin group. It
// returns the names of the changed fields that need a restart, and keeps
// their old values in the config in effect (Config, GET /v1/status): the
// daemon runs on with those until it is restarted.
func (d *Daemon) Reload(cfg Config) (ignored []string, err error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	full := cfg // as written, for the next start
	old := d.Config()
	keep := func(name string, changed bool) {
		if changed {
			ignored = append(ignored, name)
		}
	}
	keep("socket", cfg.Socket != old.Socket)
	keep("socket_mode", cfg.SocketMode != old.SocketMode)
	keep("socket_group", cfg.SocketGroup != old.SocketGroup)
	keep("state_dir", cfg.StateDir != old.StateDir)
	keep("shm_dir", cfg.ShmDir != old.ShmDir)
	keep("metrics", cfg.Metrics != old.Metrics)
	keep("log.format", cfg.Log.Format != old.Log.Format)
	cfg.Socket, cfg.SocketMode, cfg.SocketGroup, cfg.StateDir = old.Socket, old.SocketMode, old.SocketGroup, old.StateDir
	cfg.ShmDir, cfg.Metrics, cfg.Log.Format = old.ShmDir, old.Metrics, old.Log.Format
	ignored = append(ignored, controlRestart(old, &cfg)...)
	ignored = append(ignored, reloadStartOnly(old, &cfg)...)
	// What is checked is what will run: the keys kept at their old values
	// were valid at start.
	if err := cfg.Validate(); err != nil {
		d.reloadTLS() // files of their own, at the paths in use: a renewal is not held back by the config
		return nil, err
	}
	ignored = append(ignored, d.reloadS3(old, &cfg)...)
	d.reloadTLS()
	if len(ignored) > 0 {
		err := full.Validate()
		if err == nil {
			err = full.CheckFiles() // the roots and TLS files the start opens
		}
		if err != nil {
			d.log.Warn("SIGHUP: the settings that need a restart would not let lastmiled start as written: fix them before restarting",
				"fields", strings.Join(ignored, ","), "err", err)
		}
	}
	d.cfgMu.Lock()
	d.cfg = cfg
	d.restartNeeded = slices.Clone(ignored)
	d.adminGID = -1
	if cfg.AdminGroup != "" {
		gid, _ := lookupGroup(cfg.AdminGroup)
		d.adminGID = int64(gid)
	}
	d.cfgMu.Unlock()
	lvl, _ := parseLevel(cfg.Log.Level)
	d.level.Set(lvl)
	d.sched.SetCapacity(cfg.Workers)
	for _, j := range d.jobsSnapshot() {
		j.client.SetWeight(d.weightOf(j))
	}
	d.log.Info("configuration reloaded", "log_level", cfg.Log.Level, "workers", cfg.Workers, "grace", cfg.Grace,
		"drain_timeout", cfg.DrainTimeout, "memory_per_job", cfg.Memory.PerJob, "memory_total", cfg.Memory.Total,
		"default_weight", cfg.DefaultWeight, "weights", len(cfg.Weights), "not_reloaded", ignored)
	return ignored, nil
}
