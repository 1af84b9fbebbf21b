// SPDX-License-Identifier: Apache-2.0

package remoteledger

import "fmt"

// Range is a range of ledger sequences, shaped like the SDK's ledgerbackend.Range: bounded
// [From, To], or unbounded [From, ...). The zero Range is UnboundedRange(0): from the tip.
type Range struct {
	from, to uint32
	bounded  bool
}

// BoundedRange is [from, to]: every ledger in it, then the iteration ends.
func BoundedRange(from, to uint32) Range { return Range{from: from, to: to, bounded: true} }

// UnboundedRange is every ledger from from on, for as long as the server streams. from 0 means
// "from the tip": the next ledger the server publishes.
func UnboundedRange(from uint32) Range { return Range{from: from} }

// SingleLedgerRange is the one ledger seq.
func SingleLedgerRange(seq uint32) Range { return BoundedRange(seq, seq) }

// From is the range's first ledger; 0 in an unbounded range means the tip (the next ledger the
// server publishes).
func (r Range) From() uint32 { return r.from }

// To is the last ledger of a bounded range, and 0 for an unbounded one.
func (r Range) To() uint32 { return r.to }

// Bounded reports whether the range has a last ledger (BoundedRange, SingleLedgerRange).
func (r Range) Bounded() bool { return r.bounded }

// Contains reports whether every ledger of other is in r, as the SDK's Range.Contains: an
// unbounded range contains the ranges that start at or after its start, a bounded one the
// bounded ranges inside it and no unbounded one.
func (r Range) Contains(other Range) bool {
	if r.bounded && !other.bounded {
		return false
	}
	if r.bounded {
		return r.from <= other.from && r.to >= other.to
	}
	return r.from <= other.from
}

// String is "[from,to]" for a bounded range and "[from,latest)" for an unbounded one, as the
// SDK's.
func (r Range) String() string {
	if r.bounded {
		return fmt.Sprintf("[%d,%d]", r.from, r.to)
	}
	return fmt.Sprintf("[%d,latest)", r.from)
}
