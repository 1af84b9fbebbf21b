// SPDX-License-Identifier: Apache-2.0

package remoteledger

import "time"

// config is what the Options set. Every zero field is libremoteledger's default (its rl_options
// are zero-means-default throughout), so the defaults live in the library, not here.
type config struct {
	maxMessageSize   int64
	maxChunkSize     int64
	dialTimeout      int64 // nanoseconds; 0 default, negative unbounded
	handshakeTimeout int64
	idleTimeout      int64
	resumeRetries    int64
	resumeBackoff    int64
	resumeBackoffMax int64

	caFile, caDir, serverName string
	certFile, keyFile         string
	insecureSkipVerify        bool
	bearerToken               string
	allowRunChange            bool
	trustedKeys               string
	lake                      string // WithLake (lake.go)

	observer func(LedgerInfo)
	metrics  Metrics // WithMetrics (metrics.go)
}

// Option configures a Stream at New.
type Option func(*config)

// timeoutNS maps a Go timeout to the library's: d <= 0 is "no bound" (negative there), since
// zero would mean the library's default.
func timeoutNS(d time.Duration) int64 {
	if d <= 0 {
		return -1
	}
	return int64(d)
}

// WithMaxMessageSize caps an assembled ledger at n bytes (a ledger of exactly n is accepted);
// a bigger one ends the stream with ErrProtocol, refused before room is made for the chunk that
// would cross it. Default 256 MiB. Negative: no cap. It is what bounds a Stream's memory: at
// most this, plus one WithMaxChunkSize, plus a 1 MiB receive buffer and the zstd decoder's
// state, whatever the server sends (with a negative cap nothing bounds it). zstd makes a ledger
// of the cap cheap to send (256 MiB in about 9 KB of 8 MiB chunks): lower this where a Stream
// cannot afford the cap.
func WithMaxMessageSize(n int64) Option { return func(c *config) { c.maxMessageSize = n } }

// WithMaxChunkSize is the chunk bound: it caps one chunk's payload at n bytes on the wire (a
// bigger message ends the stream with ErrRead, close 1009), and every chunk by what it decodes
// to, min(n, 8 MiB): a zstd frame announcing more, or no content size, or a raw or compressed
// payload past it, ends the stream with ErrProtocol before anything is allocated for it, e.g.
// "remoteledger: protocol violation: ledger 10 chunk 3 inflates to 8388608 bytes, over the chunk
// bound of 262144 (max_chunk_size)". It must be at least the server's --chunk-size; set it to
// that (262144 by default) when known. Default 8 MiB, the largest a server can send. Negative:
// no wire limit (the decoded bound is then 8 MiB).
func WithMaxChunkSize(n int64) Option { return func(c *config) { c.maxChunkSize = n } }

// WithDialTimeout bounds the TCP connect (ErrDialTimeout). Default 30 s; d <= 0: only the
// context bounds it. Host names are resolved with a blocking getaddrinfo that neither this nor
// the context can cut short: use an address or /etc/hosts where that matters.
func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = timeoutNS(d) } }

// WithHandshakeTimeout bounds the TLS handshake and the WebSocket upgrade together
// (ErrHandshakeTimeout). Default 10 s; d <= 0: only the context bounds it.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(c *config) { c.handshakeTimeout = timeoutNS(d) }
}

// WithIdleTimeout ends a subscribed stream that receives no complete message for d
// (ErrIdleTimeout; retried under WithResume). Only time spent waiting for the server counts,
// not the loop body's. Keep it above the ledger close interval and any --max-replays wait.
// Default 60 s; d <= 0: none.
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idleTimeout = timeoutNS(d) } }

// WithResume makes a stream reconnect by itself when its connection is lost (a dropped
// connection, a server restart, a truncated range, a refused or timed-out dial, the idle
// timeout) and go on from the ledger it expected next, so the loop sees every ledger of its range
// once and in order. retries is the budget of attempts in a row without a ledger arriving (a
// ledger refills it); once spent, the last failure is yielded. Negative: no limit (only the
// context stops it). 0: no resume, the default. Never retried: ErrTooFarBehind, ErrGap,
// ErrProtocol, ErrTLS, ErrUnauthorized, ErrRunChanged, cancellation. LedgerInfo.Reconnects and
// Session.Reconnects count the reconnections.
func WithResume(retries int64) Option { return func(c *config) { c.resumeRetries = retries } }

// WithAllowRunChange lets a resumed stream go on when the server it reconnects to is of another
// run (its X-Corestream-Run token differs: a new data directory, another source), instead of
// ending with ErrRunChanged; the stream then follows the new run (Session.Run). The ledgers stay
// in sequence, but nothing vouches that they continue the same chain.
func WithAllowRunChange() Option { return func(c *config) { c.allowRunChange = true } }

// WithTrustedKeys verifies signed ledgers: file is a PEM file of one or more Ed25519 public keys
// (`openssl pkey -in core.key -pubout`), read by New (a file that cannot be read or holds no such
// key is ErrInvalid naming it). Every connection then asks corestreamd (--signing-key) for its
// signatures, and a ledger is yielded only when one of these keys signed exactly its bytes, for
// the stream's signing run, in its chain; anything else ends the stream with ErrSignature.
// Costs per ledger: SHA-256 of its bytes as they arrive and one Ed25519 verification.
func WithTrustedKeys(file string) Option { return func(c *config) { c.trustedKeys = file } }

// WithResumeBackoff sets the wait before reconnection attempt n, min(initial*2^(n-1), max), of
// which a random half is taken off. Zero or negative: the defaults, 100 ms and 10 s.
func WithResumeBackoff(initial, max time.Duration) Option {
	return func(c *config) { c.resumeBackoff, c.resumeBackoffMax = int64(initial), int64(max) }
}

// WithTLSCAFile trusts the CA certificates in this PEM file instead of the system's, for
// wss:// (and https://) URLs. Files are read at each dial, so a renewed one is picked up; one
// that cannot be read fails the dial with ErrTLS.
func WithTLSCAFile(path string) Option { return func(c *config) { c.caFile = path } }

// WithTLSCADir trusts a directory of hashed CA certificates (c_rehash layout) instead of the
// system's; with WithTLSCAFile, both are trusted.
func WithTLSCADir(path string) Option { return func(c *config) { c.caDir = path } }

// WithTLSServerName is the name sent as SNI and verified against the server's certificate,
// when it differs from the URL's host (dialling an address, say).
func WithTLSServerName(name string) Option { return func(c *config) { c.serverName = name } }

// WithTLSClientCert presents a client certificate (PEM chain, leaf first) and its private key
// (PEM; "" means the key is in certFile) to a server that requires one.
func WithTLSClientCert(certFile, keyFile string) Option {
	return func(c *config) { c.certFile, c.keyFile = certFile, keyFile }
}

// WithTLSInsecureSkipVerify skips verifying the server's certificate and name. For tests only:
// anyone on the path can then read and alter the stream.
func WithTLSInsecureSkipVerify() Option { return func(c *config) { c.insecureSkipVerify = true } }

// WithBearerToken sends "Authorization: Bearer <token>" with the upgrade request (and with
// Bounds' /healthz request). In the clear on ws://. A token with a control character is refused
// by New (ErrInvalid).
func WithBearerToken(token string) Option { return func(c *config) { c.bearerToken = token } }

// WithObserver calls fn with each ledger's LedgerInfo, on the iterating goroutine, just before
// the ledger is yielded (or returned by Session.Next). fn runs in the hot path: it must not
// block. Per call, WithLedgerObserver adds another.
func WithObserver(fn func(LedgerInfo)) Option { return func(c *config) { c.observer = fn } }

// StreamOption configures one RawLedgers call.
type StreamOption func(*streamConfig)

type streamConfig struct {
	observer func(LedgerInfo)
}

// WithLedgerObserver calls fn with each ledger's LedgerInfo of this call, on the iterating
// goroutine, just before the ledger is yielded, after the Stream's WithObserver if any.
func WithLedgerObserver(fn func(LedgerInfo)) StreamOption {
	return func(c *streamConfig) { c.observer = fn }
}

// LedgerInfo is what is known about one delivered ledger. Stamps are Unix nanoseconds; the emit
// stamps come from the server's clock and are 0 for ledgers replayed from its retention ring.
type LedgerInfo struct {
	Sequence          uint32
	EmitStartUnixNano int64  // server clock at the ledger's first byte from its source
	EmitEndUnixNano   int64  // server clock at its last byte
	ReceivedUnixNano  int64  // this host's clock once assembled and verified
	Size              int    // raw bytes
	Chunks            int    // CHUNK messages that carried it; 0 for a ledger read from a lake (WithLake)
	DiscardedPartials int    // partial assemblies dropped for a ring redelivery of it
	Reconnects        uint64 // reconnections of this call (or session) so far (WithResume)
}

// Delivery is ReceivedUnixNano - EmitEndUnixNano; ok is false for a replayed ledger.
func (l LedgerInfo) Delivery() (d time.Duration, ok bool) {
	if l.EmitEndUnixNano == 0 {
		return 0, false
	}
	return time.Duration(l.ReceivedUnixNano - l.EmitEndUnixNano), true
}
