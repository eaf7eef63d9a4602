package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/shm"
)

// The user the access tests submit as. A numeric uid needs no entry in
// /etc/passwd: the kernel checks files against the number.
const accessUID = 41001

// asUser runs requests against the daemon as accessUID, from a copy of
// the test binary that uid may execute.
type asUser struct {
	t      *testing.T
	e      *env
	client string
}

func newAsUser(t *testing.T, e *env) *asUser {
	exe, _ := os.Executable()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(e.dir, "client")
	if err := os.WriteFile(client, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return &asUser{t: t, e: e, client: client}
}

func (u *asUser) do(method, path, body string) (int, string) {
	u.t.Helper()
	cmd := exec.Command(u.client, "-test.run=^$")
	cmd.Env = childEnv("LASTMILED_HELPER=request", "H_SOCK="+u.e.sock, "H_METHOD="+method, "H_PATH="+path, "H_BODY="+body)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: accessUID, Gid: accessUID}}
	out, err := cmd.Output()
	if err != nil {
		u.t.Fatalf("client as uid %d: %v %s", accessUID, err, out)
	}
	var code int
	fmt.Sscanf(string(out), "%d", &code)
	_, rest, _ := strings.Cut(string(out), "\n")
	return code, rest
}

func (u *asUser) submit(specText string) (int, string) {
	body, _ := json.Marshal(map[string]string{"spec": specText})
	return u.do("POST", "/v1/jobs", string(body))
}

// accessTree lays out, under a world-searchable directory, the files the
// access tests read: copies of testdata/small with various permissions.
func accessTree(t *testing.T, e *env) (dir string, part func(i int) []byte) {
	dir = filepath.Join(e.dir, "data")
	part = func(i int) []byte {
		b, err := os.ReadFile(filepath.Join(smallData, fmt.Sprintf("part-%05d.parquet", i)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(name string, mode os.FileMode, b []byte) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	for i := range 3 {
		put(fmt.Sprintf("public/part-%05d.parquet", i), 0o644, part(i))
	}
	put("secret.parquet", 0o600, part(0))
	put("closed/p.parquet", 0o644, part(0))
	os.Chmod(filepath.Join(dir, "closed"), 0o700)
	put("acl.parquet", 0o644, part(0))
	os.Symlink(filepath.Join(dir, "secret.parquet"), filepath.Join(dir, "link.parquet"))
	return dir, part
}

// TestReadAsCaller: every file a job names is opened with the submitter's
// credentials, so what the kernel would refuse the user is refused with a
// 403 naming the file, whatever the way: mode bits, a side table, a
// symlink, a directory without search permission, an ACL. The user's
// readable job still runs.
func TestReadAsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to submit as another uid")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, _ := accessTree(t, e)
	public := filepath.Join(dir, "public")
	join := func(table string) string {
		return fmt.Sprintf("pipeline:\n  - join: {table: %s, on: row_id, kind: semi}\n", table)
	}
	acl := true
	if out, err := exec.Command("setfacl", "-m", fmt.Sprintf("u:%d:---", accessUID), filepath.Join(dir, "acl.parquet")).CombinedOutput(); err != nil {
		t.Logf("no ACL case: setfacl: %v %s", err, out)
		acl = false
	}
	cases := []struct{ name, inputs, extra, file string }{
		{"unreadable input", filepath.Join(dir, "secret.parquet"), "", "secret.parquet"},
		{"unreadable side table", public, join(filepath.Join(dir, "secret.parquet")), "secret.parquet"},
		{"readable symlink to an unreadable file", filepath.Join(dir, "link.parquet"), "", "link.parquet"},
		{"input under a directory without search permission", filepath.Join(dir, "closed", "p.parquet"), "", "closed/p.parquet"},
		{"glob under a directory without search permission", filepath.Join(dir, "closed", "*.parquet"), "", "closed"},
		{"side table under a directory without search permission", public, join(filepath.Join(dir, "closed", "p.parquet")), "closed/p.parquet"},
	}
	if acl {
		cases = append(cases, struct{ name, inputs, extra, file string }{"an ACL denies what the mode allows", filepath.Join(dir, "acl.parquet"), "", "acl.parquet"})
	}
	for i, c := range cases {
		code, body := u.submit(specFor(fmt.Sprintf("refused%d", i), c.inputs, c.extra))
		if code != 403 || !strings.Contains(body, c.file) || !strings.Contains(body, "permission denied") || !strings.Contains(body, fmt.Sprint(accessUID)) {
			t.Errorf("%s: %d %s; want 403 naming %s", c.name, code, body, c.file)
		}
	}
	if code, body := u.do("GET", "/v1/jobs", ""); code != 200 || strings.Contains(body, "refused") {
		t.Errorf("jobs of the user after the refusals: %d %s", code, body)
	}
	if m, _ := filepath.Glob(filepath.Join(e.shm, "lastmile.refused*")); len(m) > 0 {
		t.Errorf("rings of refused jobs exist: %v", m)
	}
	// Root, whose files they are, may: the checks are the kernel's, per user.
	if st, _ := e.do("POST", "/v1/jobs", map[string]any{"spec": specFor("root", filepath.Join(dir, "secret.parquet"), "")}, nil); st != 201 {
		t.Errorf("root's submission of its own file: %d", st)
	}
	// The same user's readable job runs, with its side table, to the end.
	code, body := u.submit(specFor("readable", public, join(filepath.Join(public, "part-00001.parquet"))))
	if code != 201 {
		t.Fatalf("readable job: %d %s", code, body)
	}
	var j jobJSON
	json.Unmarshal([]byte(body), &j)
	rows, err := readAll(e, j.ID, accessUID)
	if err != nil {
		t.Fatalf("read the readable job: %v", err)
	}
	if len(rows) == 0 || len(rows)%100 != 0 {
		t.Errorf("readable job delivered %d rows", len(rows))
	}
	e.waitJob(j.ID, 10*time.Second, "done")
}

// TestUnreadableAfterSubmit: a file that becomes unreadable after the job
// was accepted is not read at the next open. Mid-run, the job fails with
// an error naming the file and no row of it reaches the ring; after a
// restart, the persisted job is checked again and fails clearly.
func TestUnreadableAfterSubmit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to submit as another uid")
	}
	e := newEnv(t)
	e.start("-socket-mode", "0666")
	u := newAsUser(t, e)
	dir, _ := accessTree(t, e)
	public := filepath.Join(dir, "public")
	last := filepath.Join(public, "part-00002.parquet")
	// The ring holds 400 rows and nobody reads yet: production stops well
	// before the last file, which then becomes unreadable.
	code, body := u.submit(specFor("mid", public, ""))
	if code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	var j jobJSON
	json.Unmarshal([]byte(body), &j)
	e.waitJob(j.ID, 10*time.Second, "running")
	time.Sleep(300 * time.Millisecond)
	os.Chmod(last, 0o600)
	rows, err := readAll(e, j.ID, accessUID)
	if err == nil || !strings.Contains(err.Error(), "part-00002.parquet") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("reader's error: %v; want the producer's, naming part-00002.parquet", err)
	}
	got := e.waitJob(j.ID, 10*time.Second, "failed")
	if !strings.Contains(got.Error, "part-00002.parquet") || !strings.Contains(got.Error, "may not read") {
		t.Errorf("job error %q", got.Error)
	}
	first, _ := decode.PlanFiles(context.Background(), []string{filepath.Join(public, "part-00000.parquet"), filepath.Join(public, "part-00001.parquet")}, decode.PlanOptions{})
	for _, id := range rows {
		if id >= first.Rows { // datagen's row ids run on across files
			t.Fatalf("row %d of the unreadable file reached the ring", id)
		}
	}

	// Restart: the persisted job opens its files again as its owner.
	os.Chmod(last, 0o644)
	code, body = u.submit(specFor("restart", public, "epochs: 0\n"))
	if code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	json.Unmarshal([]byte(body), &j)
	e.waitJob(j.ID, 10*time.Second, "running")
	e.kill9()
	os.Chmod(filepath.Join(public, "part-00000.parquet"), 0o600)
	e.start("-socket-mode", "0666")
	got = e.waitJob(j.ID, 10*time.Second, "failed")
	if !strings.Contains(got.Error, "part-00000.parquet") || !strings.Contains(got.Error, "may not read") {
		t.Errorf("job error after the restart: %q", got.Error)
	}
}

// readAll attaches to rank 0 of job as root (an admin) and reads its ring,
// owned by owner, to the end; it returns the row ids and the producer's
// error, if it failed.
func readAll(e *env, job string, owner uint32) ([]int64, error) {
	var a attachJSON
	if st, err := e.do("POST", "/v1/jobs/"+job+"/attach", map[string]any{"rank": 0}, &a); err != nil || st != 200 {
		return nil, fmt.Errorf("attach: %d %v", st, err)
	}
	c, err := shm.OpenWith(a.Dir, a.Ring, shm.OpenOptions{Owner: owner})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows []int64
	for {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, rowIDs(b)...)
		c.Release()
	}
}
