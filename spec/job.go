package spec

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Version is the spec version this package reads.
const Version = 1

// Job is a parsed, defaulted and validated job spec.
type Job struct {
	// Version of the spec format; must be 1.
	Version int `yaml:"version"`
	// Name identifies the job in logs, metrics and ring names.
	Name string `yaml:"name"`
	// Inputs are Parquet files, globs or directories (searched recursively
	// for *.parquet), or Iceberg tables ("iceberg:PATH/metadata.json",
	// see IcebergScheme). Relative paths are relative to the spec file.
	Inputs []string `yaml:"inputs"`
	// Partitions declares columns whose values come from the input files'
	// paths, Hive style (directories named KEY=VALUE; see Partitions).
	Partitions Partitions `yaml:"partitions"`
	// Columns projects the input: only these are read and decoded. Empty
	// means every column of the input, partition columns last.
	Columns []string `yaml:"columns"`
	// Hashed names string and list<string> columns read as int64 ids
	// (see Hashed).
	Hashed Hashed `yaml:"hashed"`
	// Batch sets the trainer's batch size and what happens to the rest.
	Batch Batch `yaml:"batch"`
	// Ring sets the shared-memory rings, one per rank.
	Ring Ring `yaml:"ring"`
	// WorldSize is the number of trainer ranks the job serves (default 1).
	WorldSize int `yaml:"world_size"`
	// Epochs is how many passes to make over the input (default 1); 0
	// means without end.
	Epochs *int `yaml:"epochs"`
	// Seed drives every random choice of the job (shuffles, sampling).
	Seed uint64 `yaml:"seed"`
	// Decode tunes the decode pool.
	Decode Decode `yaml:"decode"`
	// Pipeline is the row-local ops, applied in order to every work unit's
	// rows (see docs/pipeline.md).
	Pipeline []Op `yaml:"pipeline"`
	// Shuffle shuffles work units and rows per epoch.
	Shuffle Shuffle `yaml:"shuffle"`
	// Cache keeps the pipeline's output of each work unit in memory for
	// the next epochs (see Cache).
	Cache Cache `yaml:"cache"`
	// GPU sets how batches reach the trainers' GPUs (see GPU).
	GPU GPU `yaml:"gpu"`

	file  string
	dir   string
	errs  Errors         // ParsePartial's errors, for Invalid
	lines map[string]int // field path → line
}

// Batch is the batching section.
type Batch struct {
	// Size is the number of rows per batch. Required.
	Size int `yaml:"size"`
	// Last says what to do with the rows that do not fill a last batch:
	// "drop" them (default), "pad" the batch to full size by repeating rows
	// from the start of the epoch, or "keep" a short last batch (world size
	// 1 only: with several ranks a short batch would hang DDP).
	Last string `yaml:"last"`
}

// Ring is the ring section.
type Ring struct {
	// Name of the ring; with several ranks, rank r's ring is NAME.rR.
	// Default "lastmile.JOB".
	Name string `yaml:"name"`
	// Slots per ring, at least 2 (default 4).
	Slots int `yaml:"slots"`
	// SlotSize in bytes; 0 sizes slots from the input's statistics.
	SlotSize Size `yaml:"slot_size"`
	// Dir holds the ring files (default $LASTMILE_SHM_DIR or /dev/shm).
	Dir string `yaml:"dir"`
	// Mode is the ring files' permission bits as an octal string (default
	// "0600").
	Mode string `yaml:"mode"`
	// Arena decodes units into a shared file every rank's trainer maps
	// (ring format 4.2, docs/ring-format.md §8), so that a batch of rows
	// in their unit's order names them there instead of copying them
	// into its slot. For jobs without a pipeline, row shuffle, unit
	// cache or device staging; trainers need lastmile 4.2 readers.
	Arena bool `yaml:"arena"`
}

// Cache is the cache section. The row-local part of a pipeline gives the
// same rows for a unit in every epoch (sampling hashes the row's key, not
// the epoch), so later epochs can take a unit's output from memory instead
// of decoding and transforming it again; unit order and row shuffling still
// change per epoch. Units that do not fit are recomputed.
type Cache struct {
	// MaxMemory bounds the cached output (0: no cache).
	MaxMemory Size `yaml:"max_memory"`
}

// Decode is the decode section.
type Decode struct {
	// Workers is the decode pool's size; 0 sizes it from the CPUs this
	// process may use (GOMAXPROCS and the cgroup quota).
	Workers int `yaml:"workers"`
	// InFlight bounds the work units decoded but not yet handed to the ring
	// (memory); 0 means twice the workers.
	InFlight int `yaml:"inflight"`
	// MaxUnitRows splits row groups larger than this into several work
	// units; 0 keeps whole row groups.
	MaxUnitRows int64 `yaml:"max_unit_rows"`
}

// validateArena refuses ring.arena beside what would gather or copy
// every row anyway, or stage slots only (docs/ring-format.md §8).
func (j *Job) validateArena(d *Decoder) {
	if !j.Ring.Arena {
		return
	}
	why, what := "", ""
	switch {
	case len(j.Pipeline) > 0:
		why, what = "a pipeline (its ops write new columns)", "the pipeline"
	case j.Shuffle.Buffer > 0:
		why, what = "a row shuffle (shuffle.buffer gathers every row)", "shuffle.buffer"
	case j.Cache.MaxMemory > 0:
		why, what = "a unit cache (cache.max_memory keeps units for later epochs)", "cache.max_memory"
	case j.GPU.Staging == StagingDevice:
		why, what = "device staging (gpu.staging: device copies slots only)", "gpu.staging: device"
	}
	if why != "" {
		d.Errorf(nil, "ring.arena", "the unit arena does not apply to a job with %s: remove ring.arena, or remove %s", why, what)
	}
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	ringRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,159}$`)
	columnRE = regexp.MustCompile(`^[^\x00-\x1f]{1,255}$`)
)

// EpochCount returns the number of epochs, 0 for without end.
func (j *Job) EpochCount() int {
	if j.Epochs == nil {
		return 1
	}
	return *j.Epochs
}

// File returns the path the spec was read from, "" if none.
func (j *Job) File() string { return j.file }

// RingName returns the ring name of a rank.
func (j *Job) RingName(rank int) string {
	if j.WorldSize <= 1 {
		return j.Ring.Name
	}
	return fmt.Sprintf("%s.r%d", j.Ring.Name, rank)
}

// ReadFile reads, parses and validates the spec at path.
func ReadFile(path string) (*Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job spec: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a job spec. file names it in errors and
// anchors relative input paths; it may be "".
func Parse(file string, data []byte) (*Job, error) {
	j, err := ParsePartial(Source{File: file}, data)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Source names a spec's text.
type Source struct {
	// File names the spec in errors, as its user wrote it ("" for none).
	File string
	// Dir anchors the spec's relative paths (inputs, side tables); ""
	// means File's directory.
	Dir string
}

// ParsePartial parses and validates a job spec as Parse does, but when
// data is a YAML document with errors it returns them (Errors) together
// with the job as far as it could be read, defaulted and resolved, so
// that a caller can check that job against its input too and report all
// errors of the file at once: Invalid tells which parts had errors (the
// compile of the pipeline skips those ops), and JoinErrors merges them.
// The job is nil only when data is not a YAML document.
func ParsePartial(src Source, data []byte) (*Job, error) {
	root, err := parseRoot(src.File, data)
	if err != nil {
		return nil, err
	}
	d := newDecoder(src.File)
	j := &Job{file: src.File, dir: src.Dir}
	if j.dir == "" && src.File != "" {
		j.dir = dirOf(src.File)
	}
	d.Decode(root, "", j)
	j.lines = d.lines
	// Validation goes on after decode errors, but says nothing more about
	// a field that did not decode: its zero value is no news.
	d.decoded = len(d.errs)
	j.defaults()
	j.validate(d)
	j.resolveInputs()
	if err := d.Err(); err != nil {
		j.errs = d.errs
		return j, err
	}
	return j, nil
}

// Invalid reports whether the field at path, or one inside it, had an
// error when the job was parsed: path is a dotted path such as "inputs",
// "columns[2]" or an Op's Path. Only a job that ParsePartial returned
// with errors has invalid fields.
func (j *Job) Invalid(path string) bool {
	for _, e := range j.errs {
		if within(e.Field, path) {
			return true
		}
	}
	return false
}

// Line returns the line of the field at path ("columns[2]"), 0 if the
// spec did not give it.
func (j *Job) Line(path string) int { return j.lines[path] }

// within reports whether the dotted path p is base or inside it.
func within(p, base string) bool {
	if !strings.HasPrefix(p, base) {
		return false
	}
	return len(p) == len(base) || p[len(base)] == '.' || p[len(base)] == '['
}

func dirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "."
	}
	if i == 0 {
		return "/"
	}
	return path[:i]
}

func (j *Job) defaults() {
	if j.Version == 0 {
		j.Version = Version
	}
	if j.Name == "" {
		j.Name = "job"
	}
	if j.Batch.Last == "" {
		j.Batch.Last = "drop"
	}
	if j.Ring.Name == "" {
		j.Ring.Name = "lastmile." + j.Name
	}
	if j.Ring.Slots == 0 {
		j.Ring.Slots = 4
	}
	if j.Ring.Mode == "" {
		j.Ring.Mode = "0600"
	}
	if j.WorldSize == 0 {
		j.WorldSize = 1
	}
}

func (j *Job) validate(d *Decoder) {
	if j.Version != Version {
		d.Errorf(nil, "version", "unsupported spec version %d (this lastmile reads version %d)", j.Version, Version)
	}
	if err := ValidName(j.Name); err != nil {
		d.Errorf(nil, "name", "%v", err)
	}
	if len(j.Inputs) == 0 {
		d.Errorf(nil, "inputs", "required: list the Parquet files, globs or directories to read")
	}
	for i, in := range j.Inputs {
		if strings.TrimSpace(in) == "" {
			d.Errorf(nil, fmt.Sprintf("inputs[%d]", i), "empty path")
		}
	}
	seen := map[string]bool{}
	for i, c := range j.Columns {
		p := fmt.Sprintf("columns[%d]", i)
		switch {
		case !columnRE.MatchString(c):
			d.Errorf(nil, p, "want a column name of 1 to 255 printable characters, got %q", c)
		case seen[c]:
			d.Errorf(nil, p, "column %q listed twice", c)
		}
		seen[c] = true
	}
	j.validatePartitions(d)
	j.validateHashed(d)
	if j.Batch.Size < 1 || j.Batch.Size > 1<<24 {
		d.Errorf(nil, "batch.size", "required: rows per batch, 1 to 16777216 (got %d)", j.Batch.Size)
	}
	switch j.Batch.Last {
	case "drop", "pad":
	case "keep":
		if j.WorldSize > 1 {
			d.Errorf(nil, "batch.last", `"keep" gives one rank a short batch, which hangs DDP; with world_size %d use "drop" or "pad"`, j.WorldSize)
		}
	default:
		d.Errorf(nil, "batch.last", "want drop, pad or keep, got %q", j.Batch.Last)
	}
	// A ring name derived from a bad name (the default) is that name's error.
	if err := ValidRingName(j.Ring.Name); err != nil && (j.Ring.Name != "lastmile."+j.Name || nameRE.MatchString(j.Name)) {
		d.Errorf(nil, "ring.name", "%v", err)
	}
	if j.Ring.Slots < 2 || j.Ring.Slots > 65536 {
		d.Errorf(nil, "ring.slots", "want 2 to 65536 (the producer fills one slot while it holds the last complete one), got %d", j.Ring.Slots)
	}
	if j.Ring.SlotSize < 0 || (j.Ring.SlotSize > 0 && j.Ring.SlotSize < 4096) || j.Ring.SlotSize > 1<<40 {
		d.Errorf(nil, "ring.slot_size", "want 0 (automatic) or 4KiB to 1TiB, got %s", j.Ring.SlotSize)
	}
	if _, err := j.Ring.FileMode(); err != nil {
		d.Errorf(nil, "ring.mode", "%v", err)
	}
	if j.WorldSize < 1 || j.WorldSize > 4096 {
		d.Errorf(nil, "world_size", "want 1 to 4096, got %d", j.WorldSize)
	}
	if j.Epochs != nil && *j.Epochs < 0 {
		d.Errorf(nil, "epochs", "want 0 (without end) or more, got %d", *j.Epochs)
	}
	if j.Decode.Workers < 0 || j.Decode.Workers > 1024 {
		d.Errorf(nil, "decode.workers", "want 0 (automatic) to 1024, got %d", j.Decode.Workers)
	}
	if j.Decode.InFlight < 0 || j.Decode.InFlight > 65536 {
		d.Errorf(nil, "decode.inflight", "want 0 (automatic) to 65536, got %d", j.Decode.InFlight)
	}
	if j.Decode.Workers > 0 && j.Decode.InFlight > 0 && j.Decode.InFlight < j.Decode.Workers {
		d.Errorf(nil, "decode.inflight", "must be at least decode.workers (%d), got %d", j.Decode.Workers, j.Decode.InFlight)
	}
	j.validatePipeline(d)
	j.validateArena(d)
	if j.Cache.MaxMemory < 0 || j.Cache.MaxMemory > 1<<44 {
		d.Errorf(nil, "cache.max_memory", "want 0 (no cache) to 16TiB, got %s", j.Cache.MaxMemory)
	}
	if j.Decode.MaxUnitRows < 0 {
		d.Errorf(nil, "decode.max_unit_rows", "want 0 (whole row groups) or more, got %d", j.Decode.MaxUnitRows)
	}
	j.validateGPU(d)
}

// FileMode parses Mode.
func (r Ring) FileMode() (os.FileMode, error) {
	var m uint32
	if _, err := fmt.Sscanf(r.Mode, "%o", &m); err != nil || m > 0o777 || !strings.HasPrefix(r.Mode, "0") {
		return 0, fmt.Errorf("want octal permission bits such as \"0600\" or \"0640\", got %q", r.Mode)
	}
	if m&0o600 != 0o600 {
		return 0, fmt.Errorf("mode %q must let the owner read and write (0600 at least)", r.Mode)
	}
	return os.FileMode(m), nil
}

func (j *Job) resolveInputs() {
	if j.dir == "" || j.dir == "." {
		return
	}
	for i, in := range j.Inputs {
		j.Inputs[i] = anchor(j.dir, in)
	}
}

// Marshal renders the job as YAML (defaults filled in), for logs and for the
// daemon's state directory.
func (j *Job) Marshal() ([]byte, error) {
	return yaml.Marshal(j)
}
