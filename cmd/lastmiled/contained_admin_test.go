package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainedRootIsNoAdmin: root in a container is refused as uid 0,
// but it holds CAP_SETGID and CAP_SETUID in its container (docker's and
// Kubernetes' defaults), so it may call from any gid and uid it likes
// (and a pod needs no root for that: runAsGroup is its author's choice).
// isAdmin took the caller's primary gid from SO_PEERCRED at its word, so
// contained root that set its gid to admin_group's and its uid to any
// non-zero one was an admin (found by a review): it saw, attached to and
// canceled every user's job. No caller in another pid namespace is an
// admin now.
func TestContainedRootIsNoAdmin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make namespaces and call as another uid")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	e := newEnv(t)
	// adm (gid 4) is admin_group; uid 41001 is not in it in /etc/group.
	if err := os.WriteFile(filepath.Join(e.dir, "lastmiled.yaml"), []byte("admin_group: adm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, part := accessTree(t, e)
	file := filepath.Join(dir, "p.parquet")
	if err := os.WriteFile(file, part(0), 0o644); err != nil {
		t.Fatal(err)
	}
	// A job of host root's.
	j := e.submit(specFor("roots-job", file, ""), nil)

	for _, c := range []struct {
		name    string
		unshare []string
		want    int
	}{
		// Host root may (an admin on its host).
		{"root on the host", nil, 200},
		// Root in a container, as itself: refused.
		{"root in a container", []string{"--pid", "--fork"}, 403},
		// The same root with gid adm and another uid: still no admin.
		{"root in a container, as gid adm", []string{"--pid", "--fork"}, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			drop := ""
			if strings.HasSuffix(c.name, "as gid adm") {
				drop = fmt.Sprintf("setpriv --reuid=%d --regid=4 --clear-groups ", accessUID)
			}
			code, rest := u.requestIn(t, c.unshare, drop, "GET", "/v1/jobs/"+j.ID, "")
			if code != c.want && !(c.want == 404 && code == 403) {
				t.Errorf("GET root's job: %d %s, want %d (403 or 404: not served)", code, rest, c.want)
			}
		})
	}
}
