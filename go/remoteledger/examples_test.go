// SPDX-License-Identifier: Apache-2.0

package remoteledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/corestream/corestream/go/remoteledger"
)

// The examples run in go test against corestreamds that TestMain starts, with the synthetic
// source (1000-byte ledgers from ledger 1); they read the URL from the environment as a program
// reads it from its configuration.

// Stream a bounded range: each ledger verified, in order, then the loop ends. The slice is
// borrowed until the next step: decode it in the loop body, or copy it.
func ExampleStream_RawLedgers() {
	s, err := remoteledger.New(os.Getenv("CORESTREAMD_URL")) // e.g. ws://core-box:8462
	if err != nil {
		log.Fatal(err)
	}
	var seq uint32
	seen := remoteledger.WithLedgerObserver(func(i remoteledger.LedgerInfo) { seq = i.Sequence })
	for ledger, err := range s.RawLedgers(context.Background(), remoteledger.BoundedRange(1, 3), seen) {
		if err != nil {
			log.Fatal(err) // at most one error, and the loop ends after it
		}
		fmt.Printf("ledger %d: %d bytes\n", seq, len(ledger))
	}
	// Output:
	// ledger 1: 1000 bytes
	// ledger 2: 1000 bytes
	// ledger 3: 1000 bytes
}

// Pull ledgers one at a time with a Backend, as from the SDK's captive core: PrepareRange, then
// GetLedgerRaw for each sequence (it blocks until the ledger arrives; the caller owns the bytes).
func ExampleBackend() {
	b, err := remoteledger.NewBackend(os.Getenv("CORESTREAMD_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.PrepareRange(ctx, remoteledger.BoundedRange(10, 12)); err != nil {
		log.Fatal(err)
	}
	for seq := uint32(10); seq <= 12; seq++ {
		ledger, err := b.GetLedgerRaw(ctx, seq)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("ledger %d: %d bytes\n", seq, len(ledger))
	}
	// A ledger already passed is served again, by a new subscription from the server's ring.
	if ledger, err := b.GetLedgerRaw(ctx, 10); err == nil {
		fmt.Printf("ledger 10 again: %d bytes\n", len(ledger))
	}
	// Past the prepared bounded range: an error, as with captive core.
	_, err = b.GetLedgerRaw(ctx, 13)
	fmt.Println(errors.Is(err, remoteledger.ErrInvalid))
	// Output:
	// ledger 10: 1000 bytes
	// ledger 11: 1000 bytes
	// ledger 12: 1000 bytes
	// ledger 10 again: 1000 bytes
	// true
}

// Resume: WithResume reconnects by itself when the connection drops or the server restarts, and
// goes on from the ledger expected next, so the loop sees every ledger once, in order. A consumer
// that stops (or restarts) goes on from the ledger after the last one it committed.
func ExampleWithResume() {
	s, err := remoteledger.New(os.Getenv("CORESTREAMD_URL"),
		remoteledger.WithResume(-1), // no limit: only ctx ends the retries
		remoteledger.WithResumeBackoff(100*time.Millisecond, 10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var last uint32 // the last ledger committed
	seen := remoteledger.WithLedgerObserver(func(i remoteledger.LedgerInfo) { last = i.Sequence })
	for _, err := range s.RawLedgers(ctx, remoteledger.UnboundedRange(20), seen) {
		if err != nil {
			log.Fatal(err)
		}
		if last == 22 {
			break // the consumer stops: the stream is closed when the loop statement returns
		}
	}
	fmt.Println("stopped after", last)
	for _, err := range s.RawLedgers(ctx, remoteledger.BoundedRange(last+1, last+3), seen) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("ledger", last)
	}
	// Output:
	// stopped after 22
	// ledger 23
	// ledger 24
	// ledger 25
}

// TLS with a bearer token: the server's certificate is verified against a CA file (instead of
// the system's CAs), and the token is sent with the upgrade (and with Bounds' /healthz request).
func ExampleWithBearerToken() {
	url := os.Getenv("CORESTREAMD_TLS_URL") // e.g. wss://core-box:8462
	ca := remoteledger.WithTLSCAFile(os.Getenv("CORESTREAMD_CA_FILE"))
	s, err := remoteledger.New(url, ca, remoteledger.WithBearerToken(os.Getenv("CORESTREAMD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	for _, err := range s.RawLedgers(context.Background(), remoteledger.BoundedRange(1, 5)) {
		if err != nil {
			log.Fatal(err)
		}
		n++
	}
	fmt.Println(n, "ledgers over TLS")

	// Without the token, the server refuses the upgrade.
	s, _ = remoteledger.New(url, ca)
	for _, err := range s.RawLedgers(context.Background(), remoteledger.BoundedRange(1, 5)) {
		fmt.Println(errors.Is(err, remoteledger.ErrUnauthorized), err != nil)
	}
	// Output:
	// 5 ledgers over TLS
	// true true
}
