package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootInAContainer: lastmiled reads for uid 0 with its own rights
// only for callers in its own pid namespace. Root in a container (its
// own pid namespace, as a Kubernetes pod or docker gives it) is refused,
// saying to run as a non-root user: its mount namespace shows it only its
// own files, and the daemon would otherwise read for it everything the
// daemon's view holds. (A security review found a root caller whose
// mount namespace hid the file submit a job reading it.) Root in only a
// mount namespace of its own (a sandboxed service on the host) and a
// non-root user in a container are served as before: the kernel checks
// their uid on every file.
func TestRootInAContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make namespaces and submit as another uid")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, part := accessTree(t, e)
	file := filepath.Join(dir, "p.parquet")
	if err := os.WriteFile(file, part(0), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		uid     int
		unshare []string
		want    int
	}{
		{"root in its own pid namespace", 0, []string{"--pid", "--fork"}, 403},
		{"root in its own pid and mount namespaces", 0, []string{"--pid", "--fork", "--mount", "--mount-proc"}, 403},
		{"root in its own mount namespace only", 0, []string{"--mount"}, 201},
		{"uid 41001 in its own pid namespace", accessUID, []string{"--pid", "--fork"}, 201},
	} {
		t.Run(c.name, func(t *testing.T) {
			drop := ""
			if c.uid != 0 {
				drop = fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups ", c.uid, c.uid)
			}
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/v1/jobs", mustJSON(t, map[string]string{"spec": specFor(fmt.Sprintf("ns%d-%d", c.uid, len(c.unshare)), file, "")})},
				{"GET", "/v1/jobs", ""},
			} {
				code, rest := u.requestIn(t, c.unshare, drop, req.method, req.path, req.body)
				want := c.want
				if req.method == "GET" && want == 201 {
					want = 200
				}
				if code != want {
					t.Fatalf("%s %s: %d %s, want %d", req.method, req.path, code, rest, want)
				}
				if code == 403 && !strings.Contains(rest, "non-root user") {
					t.Errorf("refusal does not say what to do: %s", rest)
				}
				if code == 201 {
					var j jobJSON
					json.Unmarshal([]byte(rest), &j)
					e.do("DELETE", "/v1/jobs/"+j.ID, nil, nil)
				}
			}
		})
	}
}

// requestIn sends one request as u's client run by unshare(1) with
// unshare's flags, through drop (a setpriv command line, or ""), and
// returns the status and body.
func (u *asUser) requestIn(t *testing.T, unshare []string, drop, method, path, body string) (int, string) {
	t.Helper()
	args := append(append([]string{}, unshare...), "sh", "-c", fmt.Sprintf("exec %s%s -test.run=^$", drop, u.client))
	cmd := exec.Command("unshare", args...)
	cmd.Env = childEnv("LASTMILED_HELPER=request", "H_SOCK="+u.e.sock, "H_METHOD="+method, "H_PATH="+path, "H_BODY="+body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v %s", err, out)
	}
	var code int
	fmt.Sscanf(string(out), "%d", &code)
	_, rest, _ := strings.Cut(string(out), "\n")
	return code, rest
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
