package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/lastmile/lastmile/cpus"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/shm"
)

// maxBody is the largest control.max_body; bounded applies the configured
// one to every request.
const maxBody = 64 << 20

// api returns the control API's handler (docs/control-api.md).
func (d *Daemon) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/jobs", d.methods(map[string]http.HandlerFunc{"GET": d.listJobs, "POST": d.postJob}))
	mux.HandleFunc("/v1/jobs/{id}", d.methods(map[string]http.HandlerFunc{"GET": d.getJob, "DELETE": d.deleteJob}))
	mux.HandleFunc("/v1/jobs/{id}/attach", d.methods(map[string]http.HandlerFunc{"POST": d.attachJob}))
	mux.HandleFunc("/v1/jobs/{id}/counts", d.methods(map[string]http.HandlerFunc{"GET": d.getCounts, "POST": d.postCounts}))
	mux.HandleFunc("/v1/status", d.methods(map[string]http.HandlerFunc{"GET": d.status}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "no such endpoint %s %s: see docs/control-api.md (paths start with /v1/)", r.Method, r.URL.Path))
	})
	return d.bounded(d.recoverer(refuseContained(mux)))
}

// recoverer turns a handler's panic into a 500: bad input must never
// take the daemon down.
func (d *Daemon) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				d.log.Error("BUG: control API handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeError(w, errorf(http.StatusInternalServerError, "internal error (logged): %v", p))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func (d *Daemon) methods(m map[string]http.HandlerFunc) http.HandlerFunc {
	var allow []string
	for k := range m {
		allow = append(allow, k)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		h, ok := m[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errorf(http.StatusInternalServerError, "%v", err)
	}
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	body := struct {
		Error  string       `json:"error"`
		Fields []fieldError `json:"fields,omitempty"`
	}{ae.msg, ae.fields}
	writeJSON(w, ae.status, body)
}

// decodeBody reads one JSON object of at most maxBody bytes into v,
// refusing unknown fields and trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return bodyError(err)
		}
		return errorf(http.StatusBadRequest, "request body: data after the JSON object")
	}
	bodyRead(w)
	return nil
}

func bodyError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return bodyTooLarge(mbe.Limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "empty request body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body: truncated JSON")
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "request body: malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return errorf(http.StatusBadRequest, "request body: want a JSON object, got %s", te.Value)
		}
		return errorf(http.StatusBadRequest, "request body: field %q: want %s, got %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return errorf(http.StatusBadRequest, "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return errorf(http.StatusBadRequest, "request body: %v", err)
}

// lookup finds a job by id, or by name: the newest job of that name the
// caller may access (admins: any), so that another user's newer job of a
// name that was free does not hide one's own. It checks that the caller
// may see the job.
func (d *Daemon) lookup(r *http.Request) (*Job, error) {
	key := r.PathValue("id")
	if err := checkJobKey(key); err != nil {
		return nil, err
	}
	p := peerFrom(r.Context())
	jobs := d.jobsSnapshot() // newest first
	for _, j := range jobs {
		if j.id == key {
			if !d.mayAccess(p, j) {
				return nil, errorf(http.StatusForbidden, "job %s belongs to uid %d", j.id, j.owner)
			}
			return j, nil
		}
	}
	var other *Job
	for _, j := range jobs {
		if j.name != key {
			continue
		}
		if d.mayAccess(p, j) {
			return j, nil
		}
		if other == nil {
			other = j
		}
	}
	if other != nil {
		// Only other users' jobs have that name: say so, without their ids.
		return nil, errorf(http.StatusForbidden, "job %q belongs to uid %d", key, other.owner)
	}
	return nil, errorf(http.StatusNotFound, "no job %q", key)
}

func (d *Daemon) postJob(w http.ResponseWriter, r *http.Request) {
	var req submitRequest
	name := func() string { return specName(req.Spec) }
	if err := decodeBody(w, r, &req); err != nil {
		d.refuse(w, r, "submit", name, nil, err)
		return
	}
	p := peerFrom(r.Context())
	if !p.ok {
		d.refuse(w, r, "submit", name, nil, errorf(http.StatusForbidden, "cannot read the caller's credentials (SO_PEERCRED)"))
		return
	}
	j, created, err := d.submit(r.Context(), p, req)
	if err != nil {
		d.refuse(w, r, "submit", name, nil, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, j.view())
}

func (d *Daemon) listJobs(w http.ResponseWriter, r *http.Request) {
	p := peerFrom(r.Context())
	out := struct {
		Jobs []jobView `json:"jobs"`
	}{Jobs: []jobView{}}
	for _, j := range d.jobsSnapshot() {
		if d.mayAccess(p, j) {
			out.Jobs = append(out.Jobs, j.view())
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := d.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j.view())
}

func (d *Daemon) deleteJob(w http.ResponseWriter, r *http.Request) {
	j, err := d.lookup(r)
	if err != nil {
		writeError(w, err)
		return
	}
	p := peerFrom(r.Context())
	j.log.Info("cancel requested", "uid", p.uid, "pid", p.pid)
	j.cancel(fmt.Sprintf("job canceled by uid %d", p.uid))
	j.releaseUnread()
	writeJSON(w, http.StatusOK, j.view())
}

func (d *Daemon) attachJob(w http.ResponseWriter, r *http.Request) {
	var req attachRequest
	name := func() string { return r.PathValue("id") }
	if err := decodeBody(w, r, &req); err != nil {
		d.refuse(w, r, "attach", name, nil, err)
		return
	}
	j, err := d.lookup(r)
	if err != nil {
		d.refuse(w, r, "attach", name, req.Rank, err)
		return
	}
	resp, err := j.attach(r.Context(), req)
	if err != nil {
		d.refuse(w, r, "attach", func() string { return j.name }, req.Rank, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (d *Daemon) status(w http.ResponseWriter, r *http.Request) {
	cfg := d.Config()
	counts := map[string]int{"total": 0}
	for _, s := range []State{Pending, Running, Done, Failed, Canceled} {
		counts[string(s)] = 0
	}
	for _, j := range d.jobsSnapshot() {
		j.mu.Lock()
		counts[string(j.state)]++
		j.mu.Unlock()
		counts["total"]++
	}
	capacity, busy := d.sched.Stats()
	d.mu.Lock()
	reserved := d.reservedLocked()
	d.mu.Unlock()
	metrics := d.MetricsAddr()
	if metrics == "" {
		metrics = "off"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"version":        d.version,
		"pid":            os.Getpid(),
		"started":        d.started.UTC().Format(time.RFC3339),
		"uptime_seconds": time.Since(d.started).Seconds(),
		"draining":       d.draining.Load(),
		"restart_needed": nonNil(d.RestartNeeded()),
		"config": map[string]any{
			"socket": cfg.Socket, "state_dir": cfg.StateDir, "shm_dir": cfg.ShmDir, "metrics": metrics,
			"workers": cfg.Workers, "memory_per_job": int64(cfg.Memory.PerJob), "memory_total": int64(cfg.Memory.Total),
			"grace_seconds": cfg.Grace.D().Seconds(), "drain_timeout_seconds": cfg.DrainTimeout.D().Seconds(),
			"log_level": cfg.Log.Level, "default_weight": cfg.DefaultWeight,
		},
		"jobs": counts,
		"cpu":  map[string]int{"available": cpus.Available(), "workers": capacity, "busy": busy},
		"memory": map[string]int64{"reserved": reserved, "total": int64(cfg.Memory.Total), "rss": processRSS(),
			"heap_limit": d.heapLimit.Load()},
		"control": map[string]int{"connections": d.controlConns(), "max_conns": cfg.Control.MaxConns,
			"max_conns_per_uid": cfg.Control.MaxConnsPerUID, "jobs_per_user": cfg.Limits.JobsPerUser},
		"peers": d.peersStatus(),
	})
}

// jobView is a Job as the API shows it.
type jobView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Owner     uint32 `json:"owner"`
	GID       uint32 `json:"gid"`
	State     State  `json:"state"`
	WorldSize int    `json:"world_size"`
	// Hosts and Host: the world runs on Hosts hosts, this daemon serving
	// host Host's ranks (0 and 0: one host, every rank here).
	Hosts int `json:"hosts,omitempty"`
	Host  int `json:"host,omitempty"`
	// PlanDigest identifies the units the job's plan deals out
	// (engine.PlanDigest); "" until known.
	PlanDigest string `json:"plan_digest,omitempty"`
	// Counts is where the units' counts of a job on several hosts stand:
	// "counting", "exchanging" (this host's share is counted, the other
	// hosts' are awaited from the trainers) or "known"; "" on one host.
	Counts   string `json:"counts,omitempty"`
	Epochs   int    `json:"epochs"`
	Weight   int    `json:"weight"`
	SpecHash string `json:"spec_hash"`
	// Snapshots are the Iceberg snapshots the job reads, pinned when it
	// was accepted.
	Snapshots []pin      `json:"iceberg_snapshots,omitempty"`
	Created   time.Time  `json:"created"`
	Started   *time.Time `json:"started"`
	Ended     *time.Time `json:"ended"`
	Error     string     `json:"error"`
	// Unsaved says, while writes of the job's record are failing, since
	// when and why; "" when the record is up to date.
	Unsaved    string       `json:"unsaved,omitempty"`
	Restarts   int          `json:"generation_restarts"`
	Memory     int64        `json:"memory_bytes"`
	Rings      []ringView   `json:"rings"`
	Progress   progressView `json:"progress"`
	CPUSeconds float64      `json:"cpu_seconds"`
	// BatchesPerEpoch is every rank's number of batches per epoch, null
	// until known (engine.Progress.BatchesPerEpoch); Python's len(Dataset).
	BatchesPerEpoch *int64 `json:"batches_per_epoch"`
	// GPU is the job's staging mode and where its ranks were placed.
	GPU *gpuView `json:"gpu"`
	// Advice is what the job needs, from its trainers' stalls (advice.go);
	// null until the job has run two seconds.
	Advice *adviceView `json:"advice"`
	// Spill is the current run's spill decision; null without peers. A
	// job that cannot spill (a side table outside the data roots, or an
	// Iceberg one) is off, with why, whatever the policy.
	Spill *spillView `json:"spill,omitempty"`
}

// spillView is a job's spill decision (docs/peers.md, "When a unit
// spills"): on or off, since when, why, and how often it switched.
type spillView struct {
	On       bool      `json:"on"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason"`
	Switches int64     `json:"switches"`
}

// spillViewLocked is the current run's spill decision: its spiller's
// policy, or why the job cannot spill (off); nil without peers. j.mu is
// held.
func (j *Job) spillViewLocked() *spillView {
	if sp := j.spill; sp != nil {
		on, since, why, switches := sp.PolicyState()
		return &spillView{On: on, Since: since.UTC(), Reason: why, Switches: switches}
	}
	if j.noSpill != nil {
		v := *j.noSpill
		return &v
	}
	return nil
}

type ringView struct {
	Rank             int            `json:"rank"`
	Name             string         `json:"name"`
	Dir              string         `json:"dir"`
	Generation       uint64         `json:"generation"`
	Slots            int            `json:"slots"`
	Head             uint64         `json:"head"`
	Tail             uint64         `json:"tail"`
	Occupancy        uint64         `json:"occupancy"`
	Held             int            `json:"held"`
	ConsumerAttached bool           `json:"consumer_attached"`
	ConsumerPID      int32          `json:"consumer_pid"`
	ConsumerWaiting  bool           `json:"consumer_waiting"`
	Next             *engine.Cursor `json:"next"`
	Produced         *engine.Cursor `json:"produced"`
	State            string         `json:"state"`
}

type progressView struct {
	Epoch     int64 `json:"epoch"`
	Rows      int64 `json:"rows"`
	Batches   int64 `json:"batches"`
	Bytes     int64 `json:"bytes"`
	UnitsDone int64 `json:"units_done"`
	// UnitsSpilled are the units of UnitsDone computed on CPU peers;
	// UnitsHedged, spilled units also started here because their peer was
	// slow, and HedgesWon those whose local run was used.
	UnitsSpilled    int64   `json:"units_spilled"`
	UnitsHedged     int64   `json:"units_hedged"`
	HedgesWon       int64   `json:"hedges_won"`
	UnitsInFlight   int64   `json:"units_in_flight"`
	DecodeSeconds   float64 `json:"decode_seconds"`
	PackSeconds     float64 `json:"pack_seconds"`
	FullWaitSeconds float64 `json:"full_wait_seconds"`
	// UnitsVerified are spilled units computed here as well to check the
	// peer's output (peers.verify); VerifyMismatches, those whose values
	// differed (the local output was used, the peer quarantined).
	UnitsVerified    int64 `json:"units_verified,omitempty"`
	VerifyMismatches int64 `json:"verify_mismatches,omitempty"`
	// Late columns (decoded for kept rows only): data pages read, and
	// left unread with their compressed bytes; and whether their remote
	// prefetch is by the pages wanted now (engine.LatePages).
	LatePages         int64 `json:"late_pages"`
	LatePagesUnread   int64 `json:"late_pages_unread"`
	LateUnreadBytes   int64 `json:"late_unread_bytes"`
	LateFetchDeferred bool  `json:"late_fetch_deferred"`
	// What the job's filters left out of its plan, unread: input files
	// (by partition directories or Iceberg manifests, never opened) and
	// units (by row-group statistics).
	FilesPruned int64 `json:"files_pruned"`
	UnitsPruned int64 `json:"units_pruned"`
	// RowsRuledOut is the rows of units read that the filters ruled out
	// by the page index, undecoded.
	RowsRuledOut int64 `json:"rows_ruled_out"`
	// RowsDeleted is the rows of the planned units that the input tables'
	// deletes remove, each epoch (Iceberg position and equality deletes,
	// deletion vectors).
	RowsDeleted int64 `json:"rows_deleted"`
	// ArenaUnits are the units decoded into the job's unit arena
	// (ring.arena), ArenaUnitsToHeap those decoded to the heap for want
	// of a free chunk, their batches copied.
	ArenaUnits       int64 `json:"arena_units"`
	ArenaUnitsToHeap int64 `json:"arena_units_to_heap"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (j *Job) view() jobView {
	infos, ok := j.ringInfos()
	unsaved := j.unsavedState()
	counts := j.countsState()
	j.mu.Lock()
	v := jobView{
		ID: j.id, Name: j.name, Owner: j.owner, GID: j.gid, State: j.state, WorldSize: j.spec.WorldSize,
		Hosts: j.hosts.Count, Host: j.hosts.Index, PlanDigest: j.planDigest, Counts: counts,
		Epochs: j.spec.EpochCount(), Weight: j.weight, SpecHash: j.hash, Snapshots: j.pins, Created: j.created.UTC(),
		Started: timePtr(j.started), Ended: timePtr(j.ended), Error: j.errMsg, Restarts: j.restarts,
		Memory: j.chargedLocked(), Rings: []ringView{}, Unsaved: unsaved,
	}
	tot := j.base
	fullWait := time.Duration(0)
	for _, w := range j.fullWait {
		fullWait += w
	}
	v.Progress.Epoch = j.lastEpoch // between runs, and once the job ended
	if j.state == Done && j.spec.EpochCount() > 0 {
		v.Progress.Epoch = int64(j.spec.EpochCount() - 1) // after a restart of lastmiled too
	}
	var held []int // per rank, slots production holds
	if r := j.run; r != nil {
		p := r.prog
		if !r.folded { // an ended run's counters are in j.base already
			tot.add(p)
		}
		v.Progress.Epoch = p.Epoch.Load()
		v.Progress.UnitsInFlight = p.UnitsInFlight.Load()
		v.Progress.LateFetchDeferred = p.LatePages().Deferred
		if n, ok := p.BatchesPerEpoch(); ok {
			v.BatchesPerEpoch = &n
		}
		for _, st := range p.RingStats() {
			if !r.folded {
				fullWait += st.FullWait
			}
			held = append(held, st.Held)
		}
	}
	if v.BatchesPerEpoch == nil && j.perEpoch > 0 { // known to an earlier run of the job
		n := j.perEpoch - 1
		v.BatchesPerEpoch = &n
	}
	v.Progress.Rows, v.Progress.Batches, v.Progress.Bytes, v.Progress.UnitsDone = tot.rows, tot.batches, tot.bytes, tot.units
	v.Progress.UnitsSpilled, v.Progress.UnitsHedged, v.Progress.HedgesWon = tot.spilled, tot.hedged, tot.hedgesWon
	v.Progress.UnitsVerified, v.Progress.VerifyMismatches = tot.verified, tot.mismatches
	v.Progress.LatePages, v.Progress.LatePagesUnread, v.Progress.LateUnreadBytes = tot.latePages, tot.lateUnread, tot.lateUnreadBytes
	v.Progress.FilesPruned, v.Progress.UnitsPruned = tot.filesPruned, tot.unitsPruned
	v.Progress.RowsRuledOut, v.Progress.RowsDeleted = tot.rowsRuledOut, tot.rowsDeleted
	v.Progress.ArenaUnits, v.Progress.ArenaUnitsToHeap = tot.arenaUnits, tot.arenaHeap
	v.Spill = j.spillViewLocked()
	v.Progress.DecodeSeconds, v.Progress.PackSeconds = tot.decode.Seconds(), tot.pack.Seconds()
	v.Progress.FullWaitSeconds = fullWait.Seconds()
	ranks := append([]rankRec(nil), j.ranks...)
	j.mu.Unlock()
	v.CPUSeconds = j.client.Stats().HoldTime.Seconds()
	v.Advice = j.d.jobAdvice(j)
	v.GPU = j.gpuView()
	v.Weight = j.d.weightOf(j)
	for i, in := range infos {
		if !ok[i] {
			continue
		}
		rv := ringView{
			Rank: j.rankBase + i, Name: in.Name, Dir: j.spec.Ring.Dir, Generation: in.Generation, Slots: in.Slots,
			Head: in.Head, Tail: in.Tail, Occupancy: in.Occupancy(), ConsumerAttached: in.ConsumerAttached,
			ConsumerPID: in.ConsumerPID, ConsumerWaiting: in.ConsumerWaiting && in.Head == in.Tail,
			State: stateName(in.State),
		}
		if i < len(held) && in.State == shm.StateRunning {
			rv.Held = held[i]
		}
		if c, known := standing(in, ranks[i].Start); known {
			rv.Next = &c
		}
		if in.HasLast {
			c := engine.NextCursor(in.Last)
			rv.Produced = &c
		}
		v.Rings = append(v.Rings, rv)
	}
	return v
}

func stateName(s shm.State) string {
	switch s {
	case shm.StateRunning:
		return "running"
	case shm.StateEnded:
		return "ended"
	case shm.StateFailed:
		return "failed"
	}
	return s.String()
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
