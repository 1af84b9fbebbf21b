// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A daemon SIGKILLed at random points and restarted with the same command line 20 times (each
// run continues its ring: no --start-ledger) is invisible to a resuming subscriber apart from the
// pauses: it sees every ledger once, in order, byte-exact, and no run resets the ring.
func TestResumeAcrossTwentyKills(t *testing.T) {
	const kills, last = 20, 200
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, 25))
	t.Logf("seed %d", seed)
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, 0)
	port := d.port
	s, _ := New(d.url(), WithResume(1000), WithResumeBackoff(10*time.Millisecond, 100*time.Millisecond))
	// A ring that holds nothing yet has nothing to continue: the first kill comes once ledger 1
	// is retained (on a busy machine the first write can take longer than the shortest pause).
	waitLatest(t, s, 1)

	type outcome struct {
		seqs       []uint32
		reconnects uint64
		pause      time.Duration
		err        error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		prev := time.Now()
		for b, e := range s.RawLedgers(context.Background(), BoundedRange(1, last),
			WithLedgerObserver(func(i LedgerInfo) { o.reconnects = i.Reconnects })) {
			if e != nil {
				o.err = e
				break
			}
			if now := time.Now(); now.Sub(prev) > o.pause {
				o.pause = now.Sub(prev)
			}
			prev = time.Now()
			seq := binary.BigEndian.Uint32(b)
			if !bytes.Equal(b, synthetic(seq, len(b))) {
				o.err = fmt.Errorf("ledger %d differs from the synthetic payload", seq)
				break
			}
			o.seqs = append(o.seqs, seq)
		}
		done <- o
	}()

	for k := 0; k < kills; k++ {
		// A random point in the run: the 20 ms cadence puts kills in emissions, ring writes and
		// the subscriber's catch-up after the previous restart alike.
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		d.stop(syscall.SIGKILL)
		if log := d.log.String(); strings.Contains(log, "ring reset") || strings.Contains(log, "retention reset") {
			t.Fatalf("run %d reset the ring:\n%s", k, log)
		}
		d = startDaemon(t, dataDir, port)
		if !strings.Contains(d.log.String(), " start=continue ") {
			t.Fatalf("run %d did not continue the ring:\n%s", k+1, d.log.String())
		}
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(2 * waitFor):
		t.Fatalf("the subscriber did not finish; daemon log:\n%s", d.log.String())
	}
	if o.err != nil {
		t.Fatalf("after %d ledgers: %v", len(o.seqs), o.err)
	}
	wantSeqs(t, o.seqs, 1, last)
	if log := d.log.String(); strings.Contains(log, "ring reset") || strings.Contains(log, "retention reset") {
		t.Fatalf("the last run reset the ring:\n%s", log)
	}
	t.Logf("restarts %d, ledgers %d, reconnects %d, longest pause %v", kills, len(o.seqs), o.reconnects, o.pause)
}
