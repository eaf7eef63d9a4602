package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Root in a container is not root on the host.
//
// A caller of uid 0 is read for with the daemon's own rights, as root on
// the host may read anything. But uid 0 in a container (a Kubernetes pod
// without a user namespace, docker) is the host's uid 0 confined by
// namespaces: its mount namespace shows it only its own files, and the
// daemon, which resolves a spec's paths in its own view, would read for
// it everything that view holds (every dataset, other users' job
// records). So the control API serves uid 0 only from the daemon's own
// pid namespace, and refuses root in another one, saying to run the
// trainer as a non-root user, whose files the kernel then checks as for
// any user.
//
// The test is the pid namespace, not the mount namespace: lastmiled under
// systemd runs in a mount namespace of its own (ProtectSystem=,
// PrivateTmp=), so no host process shares it, while containers have a pid
// namespace of their own and services do not. A caller whose pid is not
// visible at all (SO_PEERCRED gives 0: lastmiled itself in a pod, the
// caller in another) is contained. Otherwise its depth of pid namespaces
// (the NSpid line of its pidfd's fdinfo) is compared with the daemon's.
// The pidfd is the one the kernel took at connect (SO_PEERPIDFD, Linux
// 6.5), so a caller that exits and whose pid a host root process takes
// cannot pass for it; on older kernels it is opened from the pid
// (pidfd_open), and that race remains. The fdinfo is the daemon's own:
// /proc/PID of another user's process is hidden from a daemon that is not
// root (ProtectProc=invisible). Anything unreadable, or a caller that has
// exited, counts as contained: it is refused, never read for as the
// daemon.
//
// A caller in another pid namespace chose its own uid, gid and groups (a
// pod's runAsUser and runAsGroup; root there may take any): no gid of one
// makes it an admin, and its uid is trusted only as far as the cluster
// restricts the uids its pods may run as (Pod Security admission), which
// lastmiled cannot see. docs/daemon-security.md says so.
//
// Rejected: comparing mount namespaces (every caller of a sandboxed
// daemon differs), reading /proc/PID/ns/* or /proc/PID/status (ptrace
// access, or a /proc that shows other users' processes, neither of which
// the service has), and mapping
// contained root to nobody as NFS's root_squash does (a job owned by a
// uid its submitter is not, shared by every container's root).

// soPeerPidfd is SO_PEERPIDFD (asm-generic/socket.h), not in x/sys yet.
const soPeerPidfd = 77

// callerForeign reports whether the caller on the socket fd, whose pid
// SO_PEERCRED gave as pid, is in a pid namespace other than the daemon's.
// Such a caller chose its own uid, gid and groups (a pod's runAsUser,
// runAsGroup): root there is refused, and no gid of one makes it an
// admin.
func callerForeign(fd int, pid int32) bool {
	if pid <= 0 {
		return true
	}
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, soPeerPidfd)
	if err == unix.ENOPROTOOPT {
		// Before Linux 6.5: a pidfd of the pid, which the caller may have
		// left to another process since it connected. Any other error
		// (6.5 to 6.15 say EINVAL for a caller that has exited) is
		// foreign: the pid may be another process's now.
		pidfd, err = unix.PidfdOpen(int(pid), 0)
	}
	if err != nil {
		return true
	}
	defer unix.Close(pidfd)
	depth, err := pidNSDepth(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return true
	}
	own, err := ownDepth()
	return err != nil || depth != own
}

// ownDepth is the daemon's own depth of pid namespaces, read once it
// could be (a failed read, out of descriptors, is tried again).
func ownDepth() (int, error) {
	ownMu.Lock()
	defer ownMu.Unlock()
	if ownDepthN == 0 {
		n, err := pidNSDepth("/proc/self/status")
		if err != nil {
			return 0, err
		}
		ownDepthN = n
	}
	return ownDepthN, nil
}

var (
	ownMu     sync.Mutex
	ownDepthN int
)

// pidNSDepth returns the number of pid namespaces a process is in, from
// the one of this /proc down: the fields of the NSpid line of its status,
// or of a pidfd's fdinfo (which needs no access to the process's own
// /proc entry, hidden from a daemon that is not root by ProtectProc=).
// A pidfd of a process that has exited, or of one in no pid namespace
// below this /proc's, says Pid -1 or 0, and is an error.
func pidNSDepth(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Pid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err != nil || n <= 0 {
				return 0, fmt.Errorf("%s: %s", file, line)
			}
		}
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if n := len(strings.Fields(rest)); n > 0 {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no NSpid line", file)
}

// refuseContained answers every request of contained root with a 403
// saying what to do.
func refuseContained(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := peerFrom(r.Context()); p.ok && p.uid == 0 && p.foreign {
			writeError(w, errorf(http.StatusForbidden, "lastmiled serves uid 0 only on its host, not root in a container "+
				"(the caller's pid namespace is not lastmiled's): run the trainer as a non-root user "+
				"(in Kubernetes, securityContext.runAsUser), and lastmiled opens its files with that user's rights"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
