package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/engine"
	"github.com/lastmile/lastmile/objstore"
	"github.com/lastmile/lastmile/spec"
)

// apiError is an error with its HTTP status and, for spec errors, the
// fields at fault.
type apiError struct {
	status     int
	msg        string
	fields     []fieldError
	retryAfter int
}

type fieldError struct {
	File  string `json:"file,omitempty"`
	Line  int    `json:"line"`
	Field string `json:"field"`
	Msg   string `json:"msg"`
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// specErrors turns a spec's errors into a 400 listing every one, each
// naming the submitted file (when the request named it), line and field.
func specErrors(err error) *apiError {
	var es spec.Errors
	var fe *spec.FieldError
	switch {
	case errors.As(err, &es):
	case errors.As(err, &fe):
		es = spec.Errors{fe}
	default:
		return errorf(http.StatusBadRequest, "spec: %v", err)
	}
	e := &apiError{status: http.StatusBadRequest}
	for _, f := range es {
		e.fields = append(e.fields, fieldError{File: f.File, Line: f.Line, Field: f.Field, Msg: f.Msg})
	}
	if len(es) == 1 {
		e.msg = "spec has 1 error: " + es[0].Field + ": " + es[0].Msg
	} else {
		e.msg = fmt.Sprintf("spec has %d errors", len(es))
	}
	return e
}

// parseSpec parses a submitted spec and applies the daemon's rules: the
// world size override, rings in the daemon's shm directory with mode 0600,
// absolute inputs, and decode workers sized to the daemon's tokens. file
// names the spec in errors; relative paths are relative to baseDir. Like
// spec.ParsePartial it returns the job as far as it could be read with
// every error found, so that the caller can check it against its input as
// well; the job is nil only when the text is not YAML.
func (d *Daemon) parseSpec(text, baseDir, file string, worldOver int) (*spec.Job, error) {
	dir := baseDir
	if dir == "" {
		dir = "." // relative paths stay relative, and are refused below
	}
	job, perr := spec.ParsePartial(spec.Source{File: file, Dir: dir}, []byte(text))
	if job == nil {
		return nil, perr
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &spec.FieldError{File: file, Line: job.Line(field), Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	cfg := d.Config()
	if worldOver != 0 {
		if job.Batch.Last == "keep" && worldOver > 1 {
			bad("batch.last", `"keep" gives one rank a short batch, which hangs DDP; with world_size %d use "drop" or "pad"`, worldOver)
		}
		job.WorldSize = worldOver
	}
	if job.Ring.Dir != "" && filepath.Clean(job.Ring.Dir) != filepath.Clean(cfg.ShmDir) {
		bad("ring.dir", "lastmiled creates rings in %s only; remove ring.dir", cfg.ShmDir)
	}
	job.Ring.Dir = cfg.ShmDir
	if job.Ring.Mode != "0600" && !job.Invalid("ring.mode") {
		bad("ring.mode", "lastmiled creates rings 0600, owned by the submitter; remove ring.mode")
	}
	for i, in := range job.Inputs {
		if f := fmt.Sprintf("inputs[%d]", i); !absoluteInput(in) && !job.Invalid(f) {
			bad(f, "relative path %q: send base_dir (the directory it is relative to), or use an absolute path", in)
		}
	}
	for _, op := range job.Pipeline {
		if f := op.Path + ".join.table"; op.Kind == "join" && op.Join != nil && op.Join.Table != "" && !absoluteInput(op.Join.Table) && !job.Invalid(f) {
			bad(f, "relative path %q: send base_dir (the directory it is relative to), or use an absolute path", op.Join.Table)
		}
	}
	if job.Decode.Workers == 0 {
		// Twice the tokens: a job whose workers all hold tokens still has
		// workers waiting, so the scheduler always has a choice when a
		// token frees (a job with no waiter at that moment loses its share).
		job.Decode.Workers = 2 * cfg.Workers
	}
	return job, spec.JoinErrors(append(errs, perr)...)
}

// badInputs reports whether err, parseSpec's, is about the inputs, so
// that they cannot be planned.
func badInputs(err error) bool {
	var es spec.Errors
	errors.As(err, &es)
	for _, e := range es {
		if e.Field == "inputs" || strings.HasPrefix(e.Field, "inputs[") {
			return true
		}
	}
	return false
}

// hostsHash is a spec's hash for one host's share of its world.
func hostsHash(hash string, hosts, host int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s hosts %d host %d", hash, hosts, host)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func specHash(job *spec.Job) (string, error) {
	b, err := job.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// newJob builds a Job from a record (a new submission or a persisted job).
func (d *Daemon) newJob(rec *record) (*Job, error) {
	job, err := d.parseSpec(rec.Spec, rec.BaseDir, rec.File, rec.WorldSize)
	if err != nil {
		return nil, specErrors(err)
	}
	if err := applyPins(job, rec.Pins); err != nil {
		return nil, err
	}
	if rec.Hash == "" {
		if rec.Hash, err = specHash(job); err != nil {
			return nil, err
		}
	}
	// What a unit's count depends on besides the plan: the spec as pinned.
	countsKey, err := specHash(job)
	if err != nil {
		return nil, err
	}
	hosts := engine.Hosts{Count: rec.Hosts, Index: rec.Host}
	local, base, err := hosts.Split(job.WorldSize)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, `"hosts" %d, "host" %d: %v`, rec.Hosts, rec.Host, err)
	}
	ranks := append([]rankRec(nil), rec.Ranks...)
	for len(ranks) < local {
		ranks = append(ranks, rankRec{})
	}
	j := &Job{
		d: d, id: rec.ID, name: rec.Name, owner: rec.Owner, gid: rec.GID, groups: rec.Groups, specText: rec.Spec, pins: rec.Pins,
		baseDir: rec.BaseDir, file: rec.File, worldOver: rec.WorldSize, hosts: hosts, local: local, rankBase: base,
		unitRows: rec.UnitRows, unitRowsPlan: rec.UnitRowsPlan, unitRowsDealt: rec.UnitRowsDealt, countsKey: countsKey, shareCounts: rec.ShareCounts, exchange: newCountExchange(rec.SharedPlan, rec.SharedRows, rec.CountAlone), hash: rec.Hash, created: rec.Created, spec: job,
		finished: make(chan struct{}),
		state:    State(rec.State), errMsg: rec.Error, started: rec.Started, ended: rec.Ended,
		footprint: rec.Footprint,
		weight:    rec.Weight, restarts: rec.Restarts, ranks: ranks[:local], removed: rec.RingsRemoved, arenas: rec.Arenas,
		published: make([]uint64, local), fullWait: make([]time.Duration, local),
		emptyWait: make([]atomic.Int64, local),
	}
	j.log = d.log.With("job", j.name, "job_id", j.id)
	j.client = d.sched.NewClient(d.weightOf(j))
	return j, nil
}

// submitRequest is POST /v1/jobs's body.
type submitRequest struct {
	Spec      string `json:"spec"`
	WorldSize int    `json:"world_size"`
	// Hosts and Host: the world_size ranks run on Hosts hosts (torchrun's
	// --nnodes), and this daemon serves host Host's (its --node-rank).
	Hosts int `json:"hosts"`
	Host  int `json:"host"`
	// ShareCounts: this host counts only its share of the units, and the
	// job's trainers relay the other hosts' counts (counts.go).
	ShareCounts bool   `json:"share_counts"`
	BaseDir     string `json:"base_dir"`
	Weight      int    `json:"weight"`
	// File is the spec's file name as the user gave it, for errors.
	File string `json:"file"`
}

// submit creates a job or joins the equal one; created says which.
func (d *Daemon) submit(ctx context.Context, p peer, req submitRequest) (j *Job, created bool, err error) {
	if d.draining.Load() {
		return nil, false, &apiError{status: http.StatusServiceUnavailable, msg: "lastmiled is shutting down: retry when it is back", retryAfter: 5}
	}
	if err := checkRequest(req); err != nil {
		return nil, false, err
	}
	job, err := d.parseSpec(req.Spec, req.BaseDir, req.File, req.WorldSize)
	switch {
	case job == nil:
		return nil, false, specErrors(err)
	case err != nil && badInputs(err):
		return nil, false, specErrors(err)
	case err != nil:
		// Checked against the inputs too: every error of the file at once.
		return nil, false, d.checkJob(ctx, p, job, err)
	}
	hash, err := specHash(job)
	if err != nil {
		return nil, false, errorf(http.StatusInternalServerError, "hash spec: %v", err)
	}
	if _, _, err := (engine.Hosts{Count: req.Hosts, Index: req.Host}).Split(job.WorldSize); err != nil {
		return nil, false, errorf(http.StatusBadRequest, `"hosts" %d, "host" %d: %v`, req.Hosts, req.Host, err)
	}
	if err := checkDevices(job, req.Hosts); err != nil {
		return nil, false, err
	}
	if req.Hosts > 1 {
		// Each host's share is a job of its own: two shares never join.
		hash = hostsHash(hash, req.Hosts, req.Host)
	}
	// One submission per name at a time: eight ranks submitting the same
	// job at once plan it once and all join it.
	ex, done, err := d.claimName(ctx, job, hash, p.uid)
	if ex != nil || err != nil {
		return ex, false, err
	}
	defer done()

	exempt, err := d.checkUserLimits(p, job.Name)
	if err != nil {
		return nil, false, err
	}
	// Iceberg tables are pinned to their current snapshot now, read as
	// the submitter, and the pins recorded: every run of the job, after a
	// restart too, reads these snapshots.
	pctx, cancel := context.WithTimeout(ctx, planTimeout)
	job, pins, err := pinJob(pctx, job, d.readerFS(p.cred()))
	cancel()
	if err != nil {
		return nil, false, d.planError(ctx, p, job, err)
	}
	// Every file the job names is opened, and its footer read, with the
	// submitter's credentials before the job is accepted; the pipeline is
	// compiled against the input's schema as the run will compile it.
	if err := d.checkJob(ctx, p, job, nil); err != nil {
		return nil, false, err
	}
	local, _, _ := (engine.Hosts{Count: req.Hosts, Index: req.Host}).Split(job.WorldSize) // checked above
	need, digest, units, err := d.footprint(ctx, p, job, local)
	if err != nil {
		return nil, false, err
	}
	rec := &record{
		ID: newID(), Name: job.Name, Owner: p.uid, GID: p.gid, Groups: p.groups, Spec: req.Spec, BaseDir: req.BaseDir, File: req.File,
		WorldSize: req.WorldSize, Hosts: req.Hosts, Host: req.Host, ShareCounts: req.ShareCounts, Weight: req.Weight, Hash: hash, State: string(Pending), Created: time.Now().UTC(), Pins: pins,
	}
	j, err = d.newJob(rec)
	if err != nil {
		return nil, false, err
	}
	j.footprint, j.planDigest, j.planUnits = need, digest, units // not shared yet
	if j.hosts.Count > 1 {
		j.unitRowsPlan, j.unitRows = d.countsFor(j.countsKey, p.uid)
	}
	if err := d.addJob(j, p.uid, exempt); err != nil {
		j.client.Close()
		return nil, false, err
	}
	j.persist()
	j.log.Info("job submitted", "owner", p.uid, "world_size", job.WorldSize, "epochs", job.EpochCount(),
		"weight", d.weightOf(j), "memory", Bytes(need), "spec_hash", hash)
	go j.supervise()
	d.notifyStatus()
	return j, true, nil
}

// checkJob checks job against its inputs, read with the submitter's
// credentials (engine.Check): the projected columns and the pipeline
// compiled against the input's schema, side tables opened as the user.
// parseErr is parseSpec's error; the result holds it and every error
// found here.
func (d *Daemon) checkJob(ctx context.Context, p peer, job *spec.Job, parseErr error) error {
	pctx, cancel := context.WithTimeout(ctx, planTimeout)
	err := engine.Check(pctx, job, parseErr, d.readerFS(p.cred()))
	cancel()
	if err == nil {
		return nil
	}
	return d.planError(ctx, p, job, err)
}

// planError turns an error of planning or checking job into the answer.
func (d *Daemon) planError(ctx context.Context, p peer, job *spec.Job, err error) *apiError {
	var fe *spec.FieldError
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return errorf(http.StatusBadRequest, "job %q: planning its inputs took over %v (reading every file's footer): name fewer files or directories", job.Name, planTimeout)
	case errors.Is(err, fs.ErrPermission):
		return errorf(http.StatusForbidden, "%s", accessMsg(p.uid, err))
	case errors.Is(err, asuser.ErrNoPrivilege):
		return errorf(http.StatusInternalServerError, "%v", err)
	case errors.As(err, &fe):
		return specErrors(err)
	}
	return errorf(http.StatusBadRequest, "%v", err)
}

// claimName returns the active job a submission of job joins, or an
// error if the name is taken; else it makes the caller the only one
// submitting job's name until it calls done.
func (d *Daemon) claimName(ctx context.Context, job *spec.Job, hash string, uid uint32) (ex *Job, done func(), err error) {
	for {
		d.retireDrained(job.Name, uid)
		d.mu.Lock()
		if ex, err := d.sameName(job, hash, uid); ex != nil || err != nil {
			d.mu.Unlock()
			return ex, nil, err
		}
		wait, busy := d.submitting[job.Name]
		if !busy {
			d.submitting[job.Name] = make(chan struct{})
			d.mu.Unlock()
			break
		}
		d.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return nil, func() {
		d.mu.Lock()
		close(d.submitting[job.Name])
		delete(d.submitting, job.Name)
		d.mu.Unlock()
	}, nil
}

// retireDrained removes the rings of uid's done job named name whose
// every ring was read to its end, as the monitor would within a second: such a
// job is over, and a submission of its name makes a new job instead of
// joining one that has nothing left (an evaluation loop that builds its
// Dataset each pass would get no batch). A done job with batches left in
// a ring is still joined: a rank of its world may not have read them yet.
func (d *Daemon) retireDrained(name string, uid uint32) {
	for _, j := range d.jobsSnapshot() {
		if j.name != name || j.owner != uid {
			continue
		}
		j.mu.Lock()
		st, removed, ended := j.state, j.removed, j.ended
		j.mu.Unlock()
		if st == Done && !removed && j.drained() {
			j.log.Info("done job retired for a new submission of its name: every ring was read to its end")
			j.removeRings(ended)
		}
	}
}

// footprint returns the memory job needs with the rings of ranks of its
// ranks (engine.EstimateFootprint, its files read as the submitter), and
// the digest of its plan and its units, or why it may not have it.
func (d *Daemon) footprint(ctx context.Context, p peer, job *spec.Job, ranks int) (int64, string, int, error) {
	pctx, cancel := context.WithTimeout(ctx, planTimeout)
	fp, err := engine.EstimateFootprint(pctx, job, d.readerFS(p.cred()))
	cancel()
	if err != nil {
		return 0, "", 0, d.planError(ctx, p, job, err)
	}
	fp = fp.ForRanks(ranks) // this host's rings only
	need := fp.Bytes()
	if fp.Implausible() {
		return 0, "", 0, errorf(http.StatusBadRequest,
			"job %q: its input files' footers claim sizes no row group holds (%s): check the files, or the tool that wrote them",
			job.Name, footprintParts(fp))
	}
	if lim := int64(d.Config().Memory.PerJob); lim > 0 && need > lim {
		return 0, "", 0, errorf(http.StatusBadRequest,
			"job %q needs %s (%s) but the per-job limit is %s (memory.per_job): use fewer or smaller slots, a smaller batch, or a lower decode.inflight",
			job.Name, Bytes(need), footprintParts(fp), Bytes(lim))
	}
	return need, fp.PlanDigest, fp.Units, nil
}

// footprintParts names what a job's memory goes to: its rings, then each
// other part it has.
func footprintParts(fp engine.Footprint) string {
	rings := "rings"
	if fp.Rings == 1 {
		rings = "ring"
	}
	parts := []string{fmt.Sprintf("%d %s of %d slots of %s", fp.Rings, rings, fp.Slots, Bytes(fp.SlotSize))}
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(what, Bytes(n)))
		}
	}
	add(fp.ArenaBytes, "a %s unit arena (ring.arena)")
	if fp.InFlight > 0 {
		parts = append(parts, fmt.Sprintf("%d in-flight units of about %s", fp.InFlight, Bytes(fp.UnitBytes)))
	}
	add(fp.ShuffleBytes, "a %s shuffle window")
	add(fp.CacheBytes, "a %s unit cache")
	add(fp.SideBytes, "%s of join side tables")
	return strings.Join(parts, ", ")
}

// countsFor returns the unit counts that a job of the same spec (as
// pinned) kept, and the plan they hold for: a new job on several hosts
// then deals its units without counting them again where it plans the
// same units (engine.Options.UnitRows). The job's files were opened as its
// submitter before it got here, so the counts tell them nothing new. Only
// owner's jobs are asked: a job's counts are partly its trainers' word
// (share_counts: this host checks its own share only), and one user's
// trainers must not deal another user's units.
func (d *Daemon) countsFor(key string, owner uint32) (plan string, rows []int64) {
	d.mu.Lock()
	jobs := make([]*Job, 0, len(d.jobs))
	for _, o := range d.jobs {
		jobs = append(jobs, o)
	}
	d.mu.Unlock()
	for _, o := range jobs {
		if o.countsKey != key || o.owner != owner {
			continue
		}
		o.mu.Lock()
		plan, rows = o.unitRowsPlan, o.unitRows
		o.mu.Unlock()
		if len(rows) > 0 {
			return plan, rows
		}
	}
	return "", nil
}

// checkDevices checks the spec's gpu.devices against the ranks this
// daemon serves of the job's world (its Split is checked already): entry
// r is local rank r's GPU, so the list has one per rank of a host.
func checkDevices(job *spec.Job, hosts int) error {
	n := len(job.GPU.Devices)
	local, _, _ := (engine.Hosts{Count: hosts}).Split(job.WorldSize)
	if n == 0 || n == local {
		return nil
	}
	if hosts > 1 {
		return errorf(http.StatusBadRequest, "gpu.devices lists %d GPUs, but each of the %d hosts runs %d ranks of world_size %d: list one GPU per rank of a host (entry r is local rank r's)", n, hosts, local, job.WorldSize)
	}
	return errorf(http.StatusBadRequest, "gpu.devices lists %d GPUs for world_size %d on one host: list one GPU per rank, or submit with hosts (torchrun --nnodes) if the world spans several", n, job.WorldSize)
}

// checkRequest checks a submit request's fields other than the spec.
func checkRequest(req submitRequest) error {
	switch {
	case strings.TrimSpace(req.Spec) == "":
		return errorf(http.StatusBadRequest, `"spec" is required: the job spec as YAML or JSON text`)
	case req.WorldSize < 0 || req.WorldSize > 4096:
		return errorf(http.StatusBadRequest, `"world_size" %d: want 1 to 4096 (or leave it out)`, req.WorldSize)
	case req.Hosts < 0 || req.Hosts > 4096:
		return errorf(http.StatusBadRequest, `"hosts" %d: want 1 to 4096 (or leave it out)`, req.Hosts)
	case req.Host < 0 || req.Host >= max(req.Hosts, 1):
		return errorf(http.StatusBadRequest, `"host" %d: want 0 to %d, this host's index among the %d hosts`, req.Host, max(req.Hosts, 1)-1, max(req.Hosts, 1))
	case req.ShareCounts && req.Hosts < 2:
		return errorf(http.StatusBadRequest, `"share_counts" needs "hosts" 2 or more: one host counts every unit itself`)
	case req.Weight < 0 || req.Weight > MaxWeight:
		return errorf(http.StatusBadRequest, `"weight" %d: want 1 to %d (or leave it out)`, req.Weight, MaxWeight)
	case req.BaseDir != "" && !filepath.IsAbs(req.BaseDir):
		return errorf(http.StatusBadRequest, `"base_dir" %q: want an absolute directory`, req.BaseDir)
	}
	return nil
}

// addJob adds a new job, whose footprint is set, to the daemon, unless
// the owner's limits, the total memory budget or an active job of the
// same name forbid it.
func (d *Daemon) addJob(j *Job, uid uint32, exempt bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	need := j.footprint
	if err := d.checkUserLimitsLocked(uid, exempt, j.name, need); err != nil {
		return err
	}
	if lim := int64(d.Config().Memory.Total); lim > 0 {
		if used := d.reservedLocked(); used+need > lim {
			return &apiError{status: http.StatusServiceUnavailable, retryAfter: 30, msg: fmt.Sprintf(
				"job %q needs %s but only %s of the total memory budget (memory.total %s) is free: wait for other jobs to end and their rings to be removed, or cancel one",
				j.name, Bytes(need), Bytes(max(lim-used, 0)), Bytes(lim))}
		}
	}
	for _, ex := range d.jobs {
		ex.mu.Lock()
		active := !ex.state.Terminal()
		ex.mu.Unlock()
		if ex.name == j.name && active {
			return errorf(http.StatusConflict, "job %q exists: retry", j.name)
		}
	}
	// Again under d.mu: claimName serializes submissions of one name only,
	// so another name's job with a colliding ring file may have been added
	// while this one was planned.
	if ex, file := d.ringConflictLocked(j.spec, uid, j.name); ex != nil {
		return d.ringConflictError(j.spec, ex, file)
	}
	j.lastActive = time.Now()
	j.next = make([]engine.Cursor, j.local)
	d.jobs[j.id] = j
	return nil
}

// reservedLocked sums the memory of the jobs whose rings exist or will
// (ended ones included, until their rings are removed).
func (d *Daemon) reservedLocked() int64 {
	var n int64
	for _, j := range d.jobs {
		j.mu.Lock()
		if holdsRings(j) {
			n += j.footprint
		}
		j.mu.Unlock()
	}
	return n
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// planTimeout bounds planning a submitted job: listing its directories and
// reading its files' footers. An input such as "/" must not tie up the
// daemon.
const planTimeout = 2 * time.Minute

// accessMsg explains a refusal by the kernel to open a job's file as its
// owner. err names the file and the kernel's reason.
func accessMsg(uid uint32, err error) string {
	var ng *notGranted
	switch {
	case errors.As(err, &ng):
		// Its own text says what to do: name a granted prefix, or ask for a grant.
		return fmt.Sprintf("uid %d may not read an object of the job: %v", uid, err)
	case errors.Is(err, objstore.ErrDenied):
		return fmt.Sprintf("uid %d's job was refused by the object store: %v (lastmiled reads object storage with its own credentials, not yours: ask the administrator to check the daemon's credentials and the bucket policy for this object)", uid, err)
	}
	return fmt.Sprintf("uid %d may not read a file of the job: %v (lastmiled opens every file a job names with its submitter's own credentials: ask the file's owner for read access, or use another file)", uid, err)
}
