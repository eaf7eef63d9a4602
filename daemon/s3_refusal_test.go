package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/asuser"
	"github.com/lastmile/lastmile/objstore"
)

// TestS3RefusalSaysWhatToDo: a job refused an s3:// object (403 at
// submission, or a failed job mid-run) was told "lastmiled opens every
// file a job names with its submitter's own credentials: ask the file's
// owner for read access", which is false for object storage (the daemon
// reads it with its own credentials, within s3.allow) and sends the user
// to the wrong person. When the store itself refused the daemon, the
// user was told to check "the AWS_* environment, ~/.aws, the instance
// role": the user's own, which the daemon never reads. The message must
// say what applies: ask for a grant, or ask the administrator to fix the
// daemon's credentials or the bucket policy.
func TestS3RefusalSaysWhatToDo(t *testing.T) {
	grants, err := S3Config{Allow: []S3Grant{{Prefix: "s3://data/ctr/", Users: []string{"1001"}}}}.grants()
	if err != nil {
		t.Fatal(err)
	}
	o, _ := objstore.ParseURL("s3://data/other/a.parquet")
	notGranted := allowed(grants, asuser.Cred{UID: 1001, GID: 1001}, o)
	if notGranted == nil {
		t.Fatal("granted")
	}
	storeDenied := fmt.Errorf("s3://data/ctr/a.parquet: %w (403 AccessDenied: Access Denied): check the credentials (the AWS_* environment, ~/.aws, the instance role) and the bucket policy", objstore.ErrDenied)
	for name, err := range map[string]error{"not granted": fmt.Errorf("plan: %w", notGranted), "store denied": fmt.Errorf("plan: decode: %w", storeDenied)} {
		msg := accessMsg(1001, err)
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("%s: not a permission error", name)
		}
		if strings.Contains(msg, "file's owner") || strings.Contains(msg, "submitter's own credentials") {
			t.Errorf("%s: %q tells the user to ask a file's owner, but lastmiled reads objects with its own credentials", name, msg)
		}
		if name == "store denied" && !strings.Contains(msg, "administrator") {
			t.Errorf("%s: %q does not say that the daemon's credentials or the bucket policy (the administrator's) must change", name, msg)
		}
		t.Logf("%s: %s", name, msg)
	}
	local := accessMsg(1001, &fs.PathError{Op: "open", Path: "/data/secret.parquet", Err: fs.ErrPermission})
	if !strings.Contains(local, "file's owner") {
		t.Errorf("a local file's refusal lost its hint: %q", local)
	}
}
