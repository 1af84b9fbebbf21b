// SPDX-License-Identifier: Apache-2.0

// Command rlexample is a program outside the corestream module that uses it as RPC would: it
// streams a range from a corestreamd and prints what it got. The module's tests build it in a
// scratch directory with its own go.mod and a replace directive, as a user's tree would.
//
//	rlexample -url ws://127.0.0.1:8462 -from 1 -to 5
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/corestream/corestream/go/remoteledger"
)

func main() {
	url := flag.String("url", "ws://127.0.0.1:8462", "corestreamd URL")
	from := flag.Uint("from", 1, "first ledger")
	to := flag.Uint("to", 0, "last ledger (0: unbounded)")
	resume := flag.Int64("resume", 0, "reconnection budget (negative: no limit)")
	progress := flag.Bool("progress", false, "print each ledger's sequence as it arrives")
	flag.Parse()

	s, err := remoteledger.New(*url, remoteledger.WithResume(*resume),
		remoteledger.WithResumeBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r := remoteledger.UnboundedRange(uint32(*from))
	if *to != 0 {
		r = remoteledger.BoundedRange(uint32(*from), uint32(*to))
	}
	var n, size int
	sum := sha256.New()
	var reconnects uint64
	for ledger, err := range s.RawLedgers(ctx, r,
		remoteledger.WithLedgerObserver(func(i remoteledger.LedgerInfo) { reconnects = i.Reconnects })) {
		if errors.Is(err, context.Canceled) { // Ctrl-C: a clean end
			fmt.Printf("cancelled after %d ledgers\n", n)
			return
		}
		if err != nil {
			var behind *remoteledger.TooFarBehindError
			if errors.As(err, &behind) {
				fmt.Fprintf(os.Stderr, "too far behind: the server keeps [%d,%d]\n", behind.Oldest, behind.Latest)
			}
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		n++
		size += len(ledger)
		sum.Write(ledger) // the slice is borrowed: use it here, copy it to keep it
		if *progress {
			fmt.Printf("ledger %d\n", binary.BigEndian.Uint32(ledger)) // synthetic ledgers start with it
		}
	}
	fmt.Printf("range %v: %d ledgers, %d bytes, sha256 %x, %d reconnects\n", r, n, size, sum.Sum(nil), reconnects)
}
