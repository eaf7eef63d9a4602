// Package peer spills work units to CPU peers over Arrow Flight: the
// serving side (Server: a lastmiled with a peer: section), the requesting
// side (Pool, the peers a GPU host's daemon knows, and Spiller, one job's
// engine.Spill), the ticket that names a unit portably, and the wire form
// of a unit's output (wire.go).
//
// A unit is serializable and its output deterministic, so a unit computed
// on a peer is byte-identical to the same unit computed locally; the
// requester checks a checksum of every unit and the engine commits a unit
// only once its rows are in the local reorder stage (engine/spill.go). The
// rules for when to spill are in policy.go; docs/peers.md is the
// operator's guide.
//
// Peers trust nobody without a certificate: the transport is mutual TLS,
// and plaintext is allowed only when asked for, and only on loopback. A
// peer reads files only beneath its named data roots (package roots).
//
// The package must never import daemon or cmd; it owns no globals.
package peer
