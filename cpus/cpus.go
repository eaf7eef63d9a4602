package cpus

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Available returns the number of CPUs this process may keep busy:
// runtime.GOMAXPROCS(0), lowered to the cgroup CPU bandwidth limit rounded
// up (a quota of 1.5 CPUs gives 2). It is never less than 1. When the cgroup
// files are missing or malformed it returns GOMAXPROCS.
//
// Available reads /proc and /sys on every call (tens of microseconds); call
// it when sizing a pool, not per unit of work.
func Available() int {
	return availableFrom("/", runtime.GOMAXPROCS(0))
}

// Quota returns the cgroup CPU bandwidth limit of this process in CPUs
// (1.5 for cpu.max "150000 100000"): the smallest limit on the path from the
// process's cgroup to the root of its hierarchy. It returns false when there
// is no limit or none can be read.
func Quota() (float64, bool) {
	q, ok := quotaFrom("/")
	if !ok {
		return 0, false
	}
	return q.cpus(), true
}

// availableFrom is Available with the file system rooted at root (a fake
// /proc and /sys tree in tests) and GOMAXPROCS given.
func availableFrom(root string, gomaxprocs int) int {
	n := max(gomaxprocs, 1)
	if q, ok := quotaFrom(root); ok {
		n = min(n, q.ceil())
	}
	return n
}

// quota is a CPU bandwidth limit: us microseconds of CPU time per periodUS
// microseconds of wall time. Both are positive.
type quota struct {
	us, periodUS int64
}

func (q quota) cpus() float64 { return float64(q.us) / float64(q.periodUS) }

// ceil returns the limit in whole CPUs, rounded up, at least 1.
func (q quota) ceil() int {
	n := q.us / q.periodUS
	if q.us%q.periodUS != 0 {
		n++
	}
	return int(max(n, 1))
}

// quotaFrom returns the smallest CPU limit that applies to this process,
// looking in the cgroup v2 hierarchy and in the v1 hierarchy that has the
// cpu controller (a host in hybrid mode has both; the cpu controller is
// attached to only one of them, so at most one holds limits).
func quotaFrom(root string) (quota, bool) {
	cgroups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return quota{}, false
	}
	mountinfo, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return quota{}, false
	}
	mounts := parseMountinfo(mountinfo)

	var best quota
	found := false
	consider := func(q quota, ok bool) {
		if ok && (!found || q.cpus() < best.cpus()) {
			best, found = q, true
		}
	}
	for _, c := range parseCgroups(cgroups) {
		switch {
		case c.id == "0" && c.controllers == "":
			if dir, top, ok := cgroupDir(mounts, c.path, "cgroup2", ""); ok {
				consider(walkUp(root, dir, top, readV2))
			}
		case hasItem(c.controllers, "cpu"):
			if dir, top, ok := cgroupDir(mounts, c.path, "cgroup", "cpu"); ok {
				consider(walkUp(root, dir, top, readV1))
			}
		}
	}
	return best, found
}

// walkUp applies read to dir and to each of its parents up to and including
// top (the mount point of the hierarchy), and returns the smallest limit
// found: the kernel enforces every ancestor's limit on its descendants.
func walkUp(root, dir, top string, read func(dir string) (quota, bool)) (quota, bool) {
	var best quota
	found := false
	for {
		if q, ok := read(filepath.Join(root, dir)); ok && (!found || q.cpus() < best.cpus()) {
			best, found = q, true
		}
		parent := filepath.Dir(dir)
		if dir == top || parent == dir {
			return best, found
		}
		if _, ok := relPath(parent, top); !ok {
			return best, found
		}
		dir = parent
	}
}

// readV2 reads cgroup v2 cpu.max in dir: "max 100000" (no limit) or
// "150000 100000" (quota and period in microseconds).
func readV2(dir string) (quota, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return quota{}, false
	}
	return parseCPUMax(b)
}

var errMalformed = errors.New("malformed")

// parseCPUMax parses the contents of cpu.max. Anything but two positive
// numbers (including "max 100000") is no limit.
func parseCPUMax(b []byte) (quota, bool) {
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return quota{}, false
	}
	us, err := parsePositive(f[0])
	if err != nil {
		return quota{}, false
	}
	period, err := parsePositive(f[1])
	if err != nil {
		return quota{}, false
	}
	return quota{us: us, periodUS: period}, true
}

// readV1 reads cgroup v1 cpu.cfs_quota_us (-1 for no limit) and
// cpu.cfs_period_us in dir.
func readV1(dir string) (quota, bool) {
	qb, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return quota{}, false
	}
	pb, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return quota{}, false
	}
	us, err := parsePositive(string(bytes.TrimSpace(qb)))
	if err != nil {
		return quota{}, false // -1: no limit
	}
	period, err := parsePositive(string(bytes.TrimSpace(pb)))
	if err != nil {
		return quota{}, false
	}
	return quota{us: us, periodUS: period}, true
}

func parsePositive(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, errMalformed
	}
	return v, nil
}

// cgroupLine is one line of /proc/self/cgroup:
// "hierarchy-ID:controller-list:cgroup-path". On cgroup v2 the only line is
// "0::/path".
type cgroupLine struct {
	id, controllers, path string
}

func parseCgroups(b []byte) []cgroupLine {
	var out []cgroupLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		out = append(out, cgroupLine{id: id, controllers: controllers, path: path})
	}
	return out
}

// mount is the part of a /proc/self/mountinfo line that locates a cgroup
// hierarchy: the path inside the hierarchy that is mounted (root), where it
// is mounted, the file system type and the super options (which name the
// v1 controllers).
type mount struct {
	root, point, fstype, superOpts string
}

// parseMountinfo parses /proc/self/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2) (3)   (4)   (5)      (6)      (7)  (8) (9)    (10)         (11)
//
// Field 7 is zero or more optional fields ended by the "-" of field 8.
// Malformed lines are skipped.
func parseMountinfo(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		out = append(out, mount{
			root:      unescape(f[3]),
			point:     unescape(f[4]),
			fstype:    f[sep+1],
			superOpts: f[sep+3],
		})
	}
	return out
}

// unescape undoes the octal escapes (\040 for a space) that the kernel
// writes in mountinfo paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			sb.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// cgroupDir returns the directory (relative to the file system root) of the
// cgroup at path in the first mount of type fstype (carrying the v1
// controller, if one is named) whose root contains path, and that mount's
// mount point. A process in a cgroup namespace sees path "/" and a mount
// root of "/"; one without sees both as, say, "/docker/ID". When no mount
// root contains path (the process moved out of the mounted subtree) the
// mount point itself is used.
func cgroupDir(mounts []mount, path, fstype, controller string) (dir, top string, ok bool) {
	var fallback *mount
	for i := range mounts {
		m := &mounts[i]
		if m.fstype != fstype || (controller != "" && !hasItem(m.superOpts, controller)) {
			continue
		}
		if rel, ok := relPath(path, m.root); ok {
			return filepath.Join(m.point, rel), filepath.Clean(m.point), true
		}
		if fallback == nil {
			fallback = m
		}
	}
	if fallback != nil {
		return filepath.Clean(fallback.point), filepath.Clean(fallback.point), true
	}
	return "", "", false
}

// relPath returns path relative to prefix when prefix is path or one of its
// parents.
func relPath(path, prefix string) (string, bool) {
	path, prefix = filepath.Clean(path), filepath.Clean(prefix)
	if prefix == "/" {
		return path, true
	}
	if path == prefix {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(path, prefix+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// hasItem reports whether the comma-separated list contains item.
func hasItem(list, item string) bool {
	for list != "" {
		var s string
		s, list, _ = strings.Cut(list, ",")
		if s == item {
			return true
		}
	}
	return false
}
