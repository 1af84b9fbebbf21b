// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"errors"
	"fmt"
)

// The errors a stream ends with, one per libremoteledger result, matched with errors.Is. The
// error yielded carries libremoteledger's message verbatim (rl_stream_error: it names the URL,
// the ledger and the cause); these values give it an identity. A cancelled call is not among
// them: it yields its context's error (context.Canceled or context.DeadlineExceeded).
var (
	// ErrTooFarBehind: the ledger asked for is older than the server retains (close 4001).
	// The error is a *TooFarBehindError with the bounds; resume never retries it.
	ErrTooFarBehind = errors.New("remoteledger: requested ledger is behind the server's retention")

	// ErrGap: the server sent a ledger out of sequence. Nothing out of order was yielded.
	ErrGap = errors.New("remoteledger: ledger sequence gap")

	// ErrTruncated: the stream closed before the bounded range was delivered, or in the middle
	// of a ledger (a server shutting down: reopen from the next ledger wanted).
	ErrTruncated = errors.New("remoteledger: stream ended before the requested range was delivered")

	// ErrProtocol: a malformed message, a bad chunk count, length or checksum, a ledger over the
	// WithMaxMessageSize cap, a chunk over the WithMaxChunkSize bound (what it decodes to), or a
	// /healthz answer without its numbers. The ledger that failed verification was not yielded.
	ErrProtocol = errors.New("remoteledger: protocol violation")

	// ErrDial: no connection, or the WebSocket upgrade was refused (any status but 101; for
	// Bounds, a /healthz status other than 200). ErrDialTimeout and ErrHandshakeTimeout match
	// it too; ErrUnauthorized is the 401 case.
	ErrDial = errors.New("remoteledger: dial failed")

	// ErrUnauthorized: the server answered 401, because no token was sent ("server requires a
	// token (401)") or it was not accepted ("server rejected the token (401)"). Matches ErrDial;
	// resume does not retry it.
	ErrUnauthorized = errors.New("remoteledger: unauthorized")

	// ErrTLS: TLS could not be set up: the server's certificate failed verification, the server
	// refused ours, the two ends disagree on TLS (a plain server on wss://), or a CA, certificate
	// or key file could not be loaded. The message names the cause.
	ErrTLS = errors.New("remoteledger: tls failed")

	// ErrDialTimeout: no TCP connection within WithDialTimeout (default 30 s). Matches ErrDial.
	ErrDialTimeout = errors.New("remoteledger: dial timeout")

	// ErrHandshakeTimeout: connected, but TLS and the upgrade did not finish within
	// WithHandshakeTimeout (default 10 s): a wedged or SIGSTOPped server. Matches ErrDial.
	ErrHandshakeTimeout = errors.New("remoteledger: handshake timeout")

	// ErrRead: the connection failed once subscribed, or closed with a code other than 1000,
	// 1001, 4001 or 4002 (1011 "source failed", 1009 for a chunk over WithMaxChunkSize).
	// ErrIdleTimeout matches it too.
	ErrRead = errors.New("remoteledger: read failed")

	// ErrIdleTimeout: subscribed, but no complete message for WithIdleTimeout (default 60 s).
	// Matches ErrRead.
	ErrIdleTimeout = errors.New("remoteledger: idle timeout")

	// ErrInvalid: a URL, range or option that can never work; nothing was dialled. Also a
	// GetLedger for a ledger the session has passed or will never reach.
	ErrInvalid = errors.New("remoteledger: invalid argument")

	// ErrRunChanged: a reconnection (WithResume) reached a server of another run than the
	// stream's first connection: its 101 answer named another X-Corestream-Run token (the server
	// restarted on a new data directory, or with another source), so its ledgers may not continue
	// the ones yielded. Nothing of that server was yielded; resume never retries it.
	// WithAllowRunChange accepts the change instead. The message names both tokens:
	// "remoteledger: dial ws://…/stream?start=62: run changed: the server is now run
	// synthetic-0b5d…, the session began on run synthetic-7c31…".
	ErrRunChanged = errors.New("remoteledger: run changed")

	// ErrSignature: with WithTrustedKeys, a ledger came unsigned, signed by a key not trusted,
	// with bytes or fields other than those signed, for another signing run or out of its chain
	// (docs/PROTOCOL.md, "Signed ledgers"). The ledger was not yielded; resume never retries it.
	// The message says which: "remoteledger: signature: ledger 10 is unsigned",
	// "remoteledger: signature: ledger 10: signed by <hex>, which is not a trusted key", ….
	ErrSignature = errors.New("remoteledger: signature")

	// ErrHole: the server's ring does not hold a ledger of the range (close 4002): it was proven
	// bad and quarantined, or never written. Every ledger before it was yielded; resume never
	// retries it (the same server answers the same until the hole is filled). The message names
	// the missing ledgers: "remoteledger: ledgers 7 to 9 are missing from the server's ring
	// (requested 7)".
	ErrHole = errors.New("remoteledger: ledgers missing from the server's ring")

	// ErrLake: with WithLake, the lake could not be read: its config.json is missing, not
	// SEP-54's or of a layout this package does not read (more than one ledger per batch), of
	// another network than the server's, or an object's request failed (a status other than 200
	// and 404, named with its URL; a 503 or a failed connection once WithResume's retries are
	// spent), or an object is not the zstd of its batch. The message names the URL or path and
	// the cause: "remoteledger: lake: GET http://…/lake/ledgers/…: 500 Internal Server Error".
	// A connection that failed matches ErrDial too, a TLS failure ErrTLS, a 401 ErrUnauthorized.
	// A ledger that neither the lake nor the ring holds is not ErrLake but the ring's error
	// (*TooFarBehindError, ErrHole), its message naming the lake's answer too.
	ErrLake = errors.New("remoteledger: lake")
)

// TooFarBehindError is what ErrTooFarBehind carries: Requested is the ledger the stream needed
// next, Oldest and Latest the server's retained bounds (both 0 when its close reason could not be
// read). Read it with errors.As; errors.Is(err, ErrTooFarBehind) holds.
type TooFarBehindError struct {
	Requested, Oldest, Latest uint32
}

// Error is the message, with the bounds when the server's close reason gave them:
// "remoteledger: requested ledger is behind the server's retention: requested 1, server retains [16,20]".
func (e *TooFarBehindError) Error() string {
	if e.Oldest == 0 && e.Latest == 0 {
		return fmt.Sprintf("%s: requested %d", ErrTooFarBehind, e.Requested)
	}
	return fmt.Sprintf("%s: requested %d, server retains [%d,%d]", ErrTooFarBehind, e.Requested, e.Oldest,
		e.Latest)
}

// Unwrap is ErrTooFarBehind, for errors.Is.
func (e *TooFarBehindError) Unwrap() error { return ErrTooFarBehind }

// libError is a failure with libremoteledger's message, matching its kinds with errors.Is.
type libError struct {
	msg   string
	kinds []error
}

// Error is the library's message.
func (e *libError) Error() string { return e.msg }

// Unwrap is the error's kinds, for errors.Is.
func (e *libError) Unwrap() []error { return e.kinds }
