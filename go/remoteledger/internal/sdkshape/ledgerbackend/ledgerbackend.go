// SPDX-License-Identifier: Apache-2.0

// Package ledgerbackend is the method sets of the Stellar SDK's ingest/ledgerbackend package
// that corestream's adapters implement, transcribed (see package sdkshape for the files):
// declarations only, and Range's constructors and accessors.
package ledgerbackend

import (
	"context"
	"iter"

	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/xdr"
)

// LedgerBackend is the SDK's ledger_backend.go interface.
type LedgerBackend interface {
	GetLatestLedgerSequence(ctx context.Context) (sequence uint32, err error)
	GetLedger(ctx context.Context, sequence uint32) (xdr.LedgerCloseMeta, error)
	GetLedgerRaw(ctx context.Context, sequence uint32) ([]byte, error)
	PrepareRange(ctx context.Context, ledgerRange Range) error
	IsPrepared(ctx context.Context, ledgerRange Range) (bool, error)
	Close() error
}

// LedgerStream is the SDK's ledger_stream.go interface.
type LedgerStream interface {
	RawLedgers(ctx context.Context, ledgerRange Range) iter.Seq2[[]byte, error]
}

// Range is the SDK's range.go type: bounded [from, to] or unbounded [from, ...).
type Range struct {
	from    uint32
	to      uint32
	bounded bool
}

// BoundedRange is [from, to].
func BoundedRange(from uint32, to uint32) Range { return Range{from: from, to: to, bounded: true} }

// UnboundedRange is [from, ...).
func UnboundedRange(from uint32) Range { return Range{from: from} }

// SingleLedgerRange is [ledger, ledger].
func SingleLedgerRange(ledger uint32) Range { return BoundedRange(ledger, ledger) }

// From is the first ledger.
func (r Range) From() uint32 { return r.from }

// To is the last ledger of a bounded range.
func (r Range) To() uint32 { return r.to }

// Bounded reports whether the range has a last ledger.
func (r Range) Bounded() bool { return r.bounded }
