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

func (r Range) From() uint32  { return r.from }
func (r Range) To() uint32    { return r.to }
func (r Range) Bounded() bool { return r.bounded }

func (r Range) String() string {
	if r.bounded {
		return fmt.Sprintf("[%d,%d]", r.from, r.to)
	}
	return fmt.Sprintf("[%d,latest)", r.from)
}
