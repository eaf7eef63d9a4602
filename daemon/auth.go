package daemon

import (
	"context"
	"net"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// peer is the identity of the process at the other end of a control
// connection, as the kernel reports it (SO_PEERCRED): nothing in a request
// can claim another.
type peer struct {
	uid, gid uint32
	pid      int32
	ok       bool
}

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
	return p.ok && (p.uid == j.owner || d.isAdmin(p))
}
