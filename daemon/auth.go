package daemon

import (
	"context"
	"net"
	"os/user"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lastmile/lastmile/asuser"
)

// peer is the identity of the process at the other end of a control
// connection, as the kernel reports it (SO_PEERCRED): nothing in a request
// can claim another.
type peer struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups (SO_PEERGROUPS)
	pid      int32
	ok       bool
	// foreign is a caller in another pid namespace than the daemon's (a
	// container), which chose its own uid, gid and groups: never an
	// admin, and refused if root (contained.go).
	foreign bool
}

// cred is the identity files are opened with for p.
func (p peer) cred() asuser.Cred { return asuser.Cred{UID: p.uid, GID: p.gid, Groups: p.groups} }

type peerKey struct{}

// peerContext is the http.Server's ConnContext: it reads the peer's
// credentials once per connection.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{}
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
				if err == nil {
					p = peer{uid: cred.Uid, gid: cred.Gid, pid: cred.Pid, ok: true}
					p.groups, p.ok = peerGroups(int(fd))
					p.foreign = callerForeign(int(fd), cred.Pid)
				}
			})
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func peerFrom(ctx context.Context) peer {
	p, _ := ctx.Value(peerKey{}).(peer)
	return p
}

// isAdmin reports whether p may see and cancel every job: root, or a
// member of the admin group.
func (d *Daemon) isAdmin(p peer) bool {
	if p.foreign {
		return false
	}
	if p.uid == 0 {
		return true
	}
	d.cfgMu.Lock()
	admin := d.adminGID
	d.cfgMu.Unlock()
	if admin < 0 {
		return false
	}
	if int64(p.gid) == admin {
		return true
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(p.uid), 10))
	if err != nil {
		return false
	}
	ids, err := u.GroupIds()
	if err != nil {
		return false
	}
	for _, g := range ids {
		if g == strconv.FormatInt(admin, 10) {
			return true
		}
	}
	return false
}

// mayAccess reports whether p may see and act on j.
func (d *Daemon) mayAccess(p peer, j *Job) bool {
	return p.ok && !(p.foreign && p.uid == 0) && (p.uid == j.owner || d.isAdmin(p))
}

// peerGroups returns the supplementary groups of the process at the other
// end of a unix socket, as the kernel recorded them at connect
// (SO_PEERGROUPS, Linux 4.13). ok is false if they cannot be read: the
// connection is then treated as unauthenticated rather than as a user
// without groups, which could read less, or more through a deny ACL.
func peerGroups(fd int) (groups []uint32, ok bool) {
	buf := make([]uint32, 64)
	for range 2 {
		n := uint32(4 * len(buf))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch e {
		case 0:
			return buf[:n/4], true
		case unix.ERANGE: // n is the size needed
			buf = make([]uint32, n/4+1)
		default:
			return nil, false
		}
	}
	return nil, false
}
