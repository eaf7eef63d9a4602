package peer

import (
	"context"
	"net"

	"google.golang.org/grpc/peer"
)

// requester is who sent a unit: the name its certificate carries and the
// IP address it connects from. A peer shares its units in flight fairly
// between requesters (fairShare), and a requester is both: GPU hosts may
// share one certificate (deploy/k8s gives them all the same), and are
// still told apart by address, while one host's several connections (its
// source ports differ) count as one requester.
type requester struct {
	name string // the certificate's CommonName; "" without TLS
	host string // the remote IP address, without the port
}

// requesterOf names the requester of ctx's call.
func requesterOf(ctx context.Context) requester {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return requester{host: "unknown"}
	}
	var r requester
	if ti, ok := tlsInfo(p.AuthInfo); ok && len(ti.State.PeerCertificates) > 0 {
		r.name = ti.State.PeerCertificates[0].Subject.CommonName
	}
	r.host = "unknown"
	if p.Addr != nil {
		r.host = p.Addr.String()
		if h, _, err := net.SplitHostPort(r.host); err == nil {
			r.host = h
		}
	}
	return r
}

// key is the requester's fair-share key. A host holds no '@', so the key
// is unambiguous whatever the name holds.
func (r requester) key() string { return r.name + "@" + r.host }
