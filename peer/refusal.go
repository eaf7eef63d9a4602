package peer

// What to do about a refused certificate, on the requester: the hint its
// Warn and the peer's LastError (`lastmile status`) carry when a peer is
// excluded because a handshake refused a certificate, either the peer's
// (this host's bundle, peers.tls.ca, does not verify it) or this host's
// (the peer's alert). The peer's own log has its side (handshakeHint).

import (
	"crypto/x509"
	"errors"
	"strings"
)

// Hints by kind of refusal (refusalHint).
const (
	hintPeerUnknownCA = "no CA in this host's peers.tls.ca signed the peer's certificate: issue the peer one from a CA " +
		"in that bundle (lastmile certs -dir CADIR -role peer -hosts ADDR NAME) and SIGHUP the peer, or add the peer's CA " +
		"to peers.tls.ca and SIGHUP this daemon (a CA removed on purpose: the peer gets no units until so renewed)"
	hintPeerExpired = "the peer's certificate, or a CA of its chain, has expired or is not valid yet: renew it " +
		"(lastmile certs -dir CADIR -role peer -hosts ADDR NAME, or a new CA in both bundles) and SIGHUP the peer; " +
		"check both hosts' clocks"
	hintPeerUsage = "the peer's certificate is not one for serving (issued -role requester): issue it with " +
		"lastmile certs -role peer (or both) and SIGHUP the peer"
	hintPeerHost = "the peer's certificate does not name the address or name this host dials: renew it with " +
		"lastmile certs -hosts ADDR,NAME and SIGHUP the peer, or set peers.server_name on this host to a name it has (a restart)"
	hintPeerOther = "the peer's certificate does not verify with this host's peers.tls.ca: renew it with lastmile certs " +
		"and SIGHUP the peer, or fix peers.tls.ca and SIGHUP this daemon"
	hintOwnRefused = "the peer refused this host's certificate: renew it (lastmile certs -dir CADIR -role requester NAME, " +
		"written over peers.tls's files) and SIGHUP this daemon, or add its CA to the peer's peer.tls.ca and SIGHUP the peer; " +
		"the peer's log says why"
)

// refusalHint says what to do about a peer excluded after err, refused
// being why its connection's last handshake refused the peer's
// certificate (an x509 error; nil: it did not); "" if neither tells of a
// refused certificate.
func refusalHint(refused, err error) string {
	if refused != nil {
		var (
			hostErr    x509.HostnameError
			unknownErr x509.UnknownAuthorityError
			invalidErr x509.CertificateInvalidError
		)
		switch {
		case errors.As(refused, &hostErr):
			return hintPeerHost
		case errors.As(refused, &unknownErr):
			return hintPeerUnknownCA
		case errors.As(refused, &invalidErr) && invalidErr.Reason == x509.Expired:
			return hintPeerExpired
		case errors.As(refused, &invalidErr) && invalidErr.Reason == x509.IncompatibleUsage:
			return hintPeerUsage
		}
		return hintPeerOther
	}
	// The peer's alert about this host's certificate reaches gRPC's
	// client as text ("remote error: tls: expired certificate"), after
	// a TLS 1.3 handshake that succeeded here.
	if err != nil {
		if _, alert, ok := strings.Cut(err.Error(), "remote error: tls: "); ok && strings.Contains(alert, "certificate") {
			return hintOwnRefused
		}
	}
	return ""
}

// lastError is what the peer's LastError says of err: err, and what to
// do about it (hint) if anything (SplitFix).
func lastError(err error, hint string) string {
	if hint == "" {
		return err.Error()
	}
	return err.Error() + fixMark + hint + ")"
}

const fixMark = " (to fix: "

// SplitFix splits a PeerStats.LastError into the error and what to do
// about it ("" when it does not say), for a display that shortens the
// error but not the fix. The fix is one of this host's hints, at the
// end: a peer's error text (a gRPC status message is the peer's to
// write) may hold a fixMark too, and is no advice of this host's.
func SplitFix(lastError string) (err, fix string) {
	for _, h := range hints {
		if e, ok := strings.CutSuffix(lastError, fixMark+h+")"); ok {
			return e, h
		}
	}
	return lastError, ""
}

var hints = []string{hintPeerUnknownCA, hintPeerExpired, hintPeerUsage, hintPeerHost, hintPeerOther, hintOwnRefused}
