// SPDX-License-Identifier: Apache-2.0

// Package sdkshape holds a minimal local copy of the declarations that corestream's SDK adapters
// (package remotecore beside it, shown verbatim in docs/rpc-wiring.md) are written against, so
// that a drift in the adapters' signatures shows as a compile failure of this module rather than
// in a stellar-rpc build months later. Declarations only, typed as upstream types them: no
// behaviour is copied, and the Stellar SDK is not a dependency (it is not on the machines
// corestream is built on).
//
// The declarations were transcribed from these upstream files:
//
// github.com/stellar/go-stellar-sdk, ingest/ledgerbackend/ledger_backend.go (package
// ledgerbackend here), the method set of LedgerBackend:
//
//	GetLatestLedgerSequence(ctx context.Context) (sequence uint32, err error)
//	GetLedger(ctx context.Context, sequence uint32) (xdr.LedgerCloseMeta, error)
//	GetLedgerRaw(ctx context.Context, sequence uint32) ([]byte, error)
//	PrepareRange(ctx context.Context, ledgerRange Range) error
//	IsPrepared(ctx context.Context, ledgerRange Range) (bool, error)
//	Close() error
//
// GetLedgerRaw is in the SDK's current file (its comment: the caller owns the bytes, a copy);
// released SDKs that stellar-rpc builds against have the other five. The adapter has all six,
// so it satisfies both.
//
// github.com/stellar/go-stellar-sdk, ingest/ledgerbackend/range.go, Range (its fields
// unexported) and its constructors and methods:
//
//	func BoundedRange(from uint32, to uint32) Range
//	func UnboundedRange(from uint32) Range
//	func SingleLedgerRange(ledger uint32) Range
//	func (r Range) From() uint32
//	func (r Range) To() uint32
//	func (r Range) Bounded() bool
//
// github.com/stellar/go-stellar-sdk, ingest/ledgerbackend/ledger_stream.go, the method set of
// LedgerStream (the StreamOption parameter and WithStreamMetrics were dropped from it; an
// earlier revision had RawLedgers(ctx, ledgerRange, opts ...StreamOption)):
//
//	RawLedgers(ctx context.Context, ledgerRange Range) iter.Seq2[[]byte, error]
//
// github.com/stellar/go-stellar-sdk, xdr (package xdr here): LedgerCloseMeta, a stub with the
// two methods of the generated type that the adapters and their tests call:
//
//	func (s *LedgerCloseMeta) UnmarshalBinary(inp []byte) error
//	func (s LedgerCloseMeta) MarshalBinary() ([]byte, error)
//
// github.com/stellar/stellar-rpc, cmd/stellar-rpc/internal/ingest/service.go (released
// stellar-rpc): ingest.Config.LedgerBackend is a ledgerbackend.LedgerBackend; the service calls
// PrepareRange(ctx, UnboundedRange(next)) with a ctx it cancels on return, then GetLedger(ctx,
// seq) for seq = next, next+1, ... The daemon passes captive core there
// (cmd/stellar-rpc/internal/daemon/daemon.go, createIngestService).
//
// stellar-rpc v2's startup.go (the rpcv2 ingestion, docs/rpc-wiring.md cites its lines), the
// method set of CoreOpener, declared in this package:
//
//	OpenCore(ctx context.Context) (ledgerbackend.LedgerStream, error)
//	NetworkPassphrase() string
//
// NetworkPassphrase was added to CoreOpener when v2 began serving reads (the opener's
// configuration is the one source of the network passphrase); a corestreamd does not announce
// its network, so the remote opener carries it from RPC's configuration.
//
// When upstream changes one of these, change it here, in the same words, and the adapters
// (and the doc, which a test keeps equal to them) follow.
package sdkshape

import (
	"context"

	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"
)

// CoreOpener is stellar-rpc v2's: it hands the live ingestion loop its LedgerStream, and serving
// its network passphrase.
type CoreOpener interface {
	OpenCore(ctx context.Context) (ledgerbackend.LedgerStream, error)
	NetworkPassphrase() string
}
