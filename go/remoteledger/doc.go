// SPDX-License-Identifier: Apache-2.0

// Package remoteledger streams verified raw ledgers from a corestreamd, through libremoteledger
// (corestream's C client library) and cgo.
//
// A Stream has the shape of the Stellar SDK's ledgerbackend.LedgerStream: RawLedgers(ctx,
// range) is an iter.Seq2[[]byte, error] over the ledgers of a bounded or unbounded Range, each
// one raw LedgerCloseMeta XDR, reassembled and verified (chunk count, length, XXH64) before it is
// yielded. A few lines adapt it to the SDK's types (docs/rpc-wiring.md in the corestream
// repository). Beside it: Open, a Session pulled one ledger at a time (Next, GetLedger);
// NewBackend, a Backend with the semantics of the SDK's ledgerbackend.LedgerBackend (PrepareRange,
// then GetLedgerRaw for each sequence, as with captive core; its doc lists the differences); and
// Bounds / GetLatestLedgerSequence, the server's retained range from its /healthz. WithMetrics
// feeds a Metrics the caller implements (a Prometheus registry, say) with each ledger and
// reconnection. WithTrustedKeys checks that the core signed every ledger (corestreamd
// --signing-key): anything else ends the stream with ErrSignature. WithLake gives a Backend the
// history before the server's ring from a SEP-54 data lake (a corestreamd's /lake/, or a
// directory). The examples run in the module's tests against a real corestreamd.
//
// # Ownership of the bytes
//
// A yielded slice (and one returned by Session.Next or Session.GetLedger) is BORROWED: it is the
// library's assembly buffer, in C memory, valid until the next iteration step (the next call on
// the Session, or its Close) and overwritten then. A consumer that keeps a ledger copies it
// (bytes.Clone). Reading a slice after that is a use-after-free, not stale data. Never pass one
// to another goroutine without copying it. Backend.GetLedgerRaw is the exception: it returns a
// copy the caller owns, as the SDK's GetLedgerRaw does.
//
// # Goroutines
//
// A Stream holds a URL and options only, and is safe for concurrent use: every RawLedgers
// iteration, Open and Bounds call gets a C stream (and a connection) of its own, freed when it
// ends. A Session is used by one goroutine at a time. A Backend holds one C stream until Close;
// its methods are safe for concurrent use (see Backend). The connection is serviced on the
// iterating goroutine, inside the library, only while the loop waits for its next ledger, never
// while the loop body runs: a body slower than the server's close interval makes the server
// resend the ledgers from its retention ring, and one that falls further behind than that
// retention ends the stream with ErrTooFarBehind. The library starts no threads; the package starts a goroutine only while a
// context's cancellation is being delivered.
//
// # Cancellation and ending early
//
// When ctx is done, the call in progress (a dial, a wait for the next ledger, a backoff between
// reconnections) returns at once: a goroutine of context.AfterFunc calls rl_stream_cancel, and
// the iteration yields ctx.Err() and ends. A break out of the loop (or a panic in its body) ends
// the session cleanly: the client sends close 1000 "consumer done" and frees the C stream before
// the loop statement returns. Host names are resolved with a blocking getaddrinfo that nothing
// can cut short.
//
// # Errors
//
// An iteration ends after yielding at most one error, with libremoteledger's message and an
// identity for errors.Is (ErrDial, ErrTLS, ErrTruncated, ...) or errors.As (*TooFarBehindError).
// A bounded range that is complete, or an unbounded stream the server closed cleanly (its source
// ended, or it is shutting down between ledgers), ends with no error.
//
// # Building
//
// cgo (CGO_ENABLED=1) with pkg-config finding remoteledger.pc (set PKG_CONFIG_PATH for a prefix
// pkg-config does not search) and libzstd.pc (libzstd-dev: the lake's objects are decoded with
// libzstd directly), and libremoteledger.so.1 with libssl3, libzstd1 and libxxhash0 at run time.
// The package has no dependencies beyond the standard library.
package remoteledger
