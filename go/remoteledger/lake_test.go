// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testnet = "Test SDF Network ; September 2015"

// lakeURL is d's lake (started with --network-passphrase).
func lakeURL(d *daemon) string { return fmt.Sprintf("http://127.0.0.1:%d/lake", d.port) }

// ringFile is ledger seq as d's ring stores it.
// ringFile is d's ring file of ledger seq, once d's ring writer (at nice 19, behind on a busy
// machine) has renamed it into place: it waits for it up to 4*waitFor.
func ringFile(t *testing.T, d *daemon, seq uint32) []byte {
	t.Helper()
	path := filepath.Join(d.dataDir, "ledgers", fmt.Sprintf("ledger-%d.xdr", seq))
	deadline := time.Now().Add(4 * waitFor)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return b
		}
		if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// batchOf is the LedgerCloseMetaBatch of the one ledger seq.
func batchOf(seq uint32, ledger []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, seq)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, 1)
	return append(b, ledger...)
}

// lakeSource records, in order, the ledgers a Backend read and whether each came from the lake
// (a lake ledger has no chunks).
type lakeSource struct{ seqs, lake []uint32 }

func (s *lakeSource) observe(i LedgerInfo) {
	s.seqs = append(s.seqs, i.Sequence)
	if i.Chunks == 0 {
		s.lake = append(s.lake, i.Sequence)
	}
}

func TestLakeKey(t *testing.T) {
	for _, c := range []struct {
		seq, batch, partition uint32
		want                  string
	}{
		{53312000, 1, 64000, "FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst"},
		{5, 1, 64000, "FFFFFFFF--0-63999/FFFFFFFA--5.xdr.zst"},
		{13, 4, 2, "FFFFFFF7--8-15/FFFFFFF3--12-15.xdr.zst"},
		{7, 1, 1, "FFFFFFF8--7.xdr.zst"},
		{4294967295, 1, 64000, "0000D7FF--4294912000-8703/00000000--4294967295.xdr.zst"},
	} {
		if got := lakeKey(c.seq, c.batch, c.partition); got != c.want {
			t.Errorf("key of %d (%d a batch, %d a partition): %s, want %s", c.seq, c.batch, c.partition, got, c.want)
		}
	}
}

func TestLakeOptions(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.pem")
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithLake("ftp://lake.example/lake")}, "must use http or https, or be a directory's path"},
		{[]Option{WithLake("http:///lake")}, "no host"},
		{[]Option{WithLake(dir), WithTrustedKeys(keys)}, "WithLake with WithTrustedKeys"},
	} {
		if _, err := New("ws://127.0.0.1:1", c.opts...); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want ErrInvalid with %q", err, c.want)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:1/lake", "https://lake.example", dir, "relative/lake"} {
		if _, err := New("ws://127.0.0.1:1", WithLake(ok)); err != nil {
			t.Errorf("WithLake(%q): %v", ok, err)
		}
	}
}

// A lake behind an HTTP server of the test's: 503 is retried under WithResume (and is the error
// without it), another status is an error naming the URL and status, the bearer token and the
// TLS options are those of the Stream.
func TestLakeHTTPAnswers(t *testing.T) {
	noLeaks(t)
	const token = "lake-token-0123456789abcdef"
	object := zstdCLI(t, batchOf(7, synthetic(7, 1000)))
	var busy, calls atomic.Int32
	var status atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/lake/config.json", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"networkPassphrase":"`+testnet+`","ledgersPath":"/lake/ledgers","compression":"zstd",`+
			`"ledgersPerBatch":1,"batchesPerPartition":64000}`)
	})
	mux.HandleFunc("/lake/ledgers/FFFFFFFF--0-63999/FFFFFFF8--7.xdr.zst", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		case busy.Add(-1) >= 0:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "lake: every reader is busy and the queue is full", http.StatusServiceUnavailable)
		case status.Load() != 0:
			http.Error(w, "lake: broken", int(status.Load()))
		default:
			w.Write(object)
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	ca, cert, key := certs(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	base := strings.TrimPrefix(srv.URL, "https://")
	ctx := context.Background()
	lakeOf := func(opts ...Option) *lake {
		s, err := New("wss://"+base+"/stream", append([]Option{WithLake("https://" + base + "/lake"),
			WithTLSCAFile(ca)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		l := newLake(s)
		t.Cleanup(l.close)
		return l
	}
	backoff := WithResumeBackoff(5*time.Millisecond, 20*time.Millisecond)

	got, err := lakeOf(WithBearerToken(token)).ledger(ctx, 7)
	if err != nil || !bytes.Equal(got, synthetic(7, 1000)) {
		t.Fatalf("ledger 7: %d bytes, %v", len(got), err)
	}
	// Two 503s, retried.
	busy.Store(2)
	calls.Store(0)
	got, err = lakeOf(WithBearerToken(token), WithResume(3), backoff).ledger(ctx, 7)
	if err != nil || !bytes.Equal(got, synthetic(7, 1000)) || calls.Load() != 3 {
		t.Fatalf("after two 503s: %d bytes, %v, %d requests", len(got), err, calls.Load())
	}
	// Without WithResume, the 503 is the error; with a budget spent, the last one.
	for _, opts := range [][]Option{{WithBearerToken(token)}, {WithBearerToken(token), WithResume(1), backoff}} {
		busy.Store(5)
		_, err = lakeOf(opts...).ledger(ctx, 7)
		if !errors.Is(err, ErrLake) || !strings.Contains(err.Error(), "FFFFFFF8--7.xdr.zst: 503 Service Unavailable: lake: every reader is busy") {
			t.Fatalf("503: %v", err)
		}
	}
	busy.Store(0)
	status.Store(http.StatusInternalServerError)
	_, err = lakeOf(WithBearerToken(token), WithResume(3), backoff).ledger(ctx, 7)
	want := "remoteledger: lake: GET https://" + base + "/lake/ledgers/FFFFFFFF--0-63999/FFFFFFF8--7.xdr.zst: 500 Internal Server Error: lake: broken"
	if !errors.Is(err, ErrLake) || err.Error() != want {
		t.Fatalf("500: %v, want %s", err, want)
	}
	status.Store(0)
	if _, err = lakeOf().ledger(ctx, 7); !errors.Is(err, ErrUnauthorized) || !errors.Is(err, ErrLake) {
		t.Fatalf("no token: %v", err)
	}
	// Not the lake's CA: a TLS failure, not retried.
	s, _ := New("wss://"+base+"/stream", WithLake("https://"+base+"/lake"), WithResume(3))
	l := newLake(s)
	defer l.close()
	if _, err = l.ledger(ctx, 7); !errors.Is(err, ErrTLS) || !errors.Is(err, ErrLake) {
		t.Fatalf("an unknown CA: %v", err)
	}
}

// The Backend reads history from a lake: a daemon A with a long retention serves its lake, a
// daemon B of the same synthetic source keeps 30 ledgers. Ledger N is the same bytes on both
// (the synthetic source's, checked against A's ring files and the generator).
func TestLake(t *testing.T) {
	a := startDaemon(t, t.TempDir(), 0, "--network-passphrase", testnet)
	b := startDaemon(t, t.TempDir(), 0, "--network-passphrase", testnet, "--retention", "30")
	bs, err := New(b.url())
	if err != nil {
		t.Fatal(err)
	}
	waitBounds(t, bs, func(oldest, _ uint32) bool { return oldest >= 20 }) // 1 to 19 have left B's ring
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()
	// A's ledger N, as the lake serves it, for each ledger a Backend returned.
	fromA := func(t *testing.T, seq uint32, l []byte, err error) {
		t.Helper()
		wantLedger(t, l, err, seq)
		if !bytes.Equal(l, ringFile(t, a, seq)) {
			t.Fatalf("ledger %d differs from A's ring file", seq)
		}
	}

	t.Run("behind the ring", func(t *testing.T) {
		noLeaks(t)
		be, src := lakeBackend(t, ctx, b, lakeURL(a), UnboundedRange(1))
		_, latest, err := bs.Bounds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := latest + 40 // past B's tip when the range was prepared: live from B
		for seq := uint32(1); seq <= last; seq++ {
			l, err := be.GetLedgerRaw(ctx, seq)
			fromA(t, seq, l, err)
		}
		// Where the lake hands over to the ring depends on how far B's tip (and with it the
		// ring's oldest) moved while the lake was read: only the order is asserted.
		if len(src.lake) == 0 || src.lake[0] != 1 || src.seqs[len(src.seqs)-1] != last ||
			src.lake[len(src.lake)-1] >= last {
			t.Fatalf("read %v, of which %v from the lake: want 1 and on from the lake, the last ones from the ring",
				src.seqs, src.lake)
		}
		t.Logf("%d ledgers, %d from the lake (the last %d), %d read in all", last, len(src.lake),
			src.lake[len(src.lake)-1], len(src.seqs))
		if !prepared(t, be, UnboundedRange(1)) {
			t.Fatal("not prepared after the stream")
		}
		// A ledger passed, before the ring: the lake again.
		l, err := be.GetLedgerRaw(ctx, 2)
		fromA(t, 2, l, err)
	})

	t.Run("bounded in the lake", func(t *testing.T) {
		noLeaks(t)
		be, src := lakeBackend(t, ctx, b, lakeURL(a), BoundedRange(3, 9))
		for seq := uint32(3); seq <= 9; seq++ {
			l, err := be.GetLedgerRaw(ctx, seq)
			fromA(t, seq, l, err)
		}
		if !equalSeqs(src.seqs, []uint32{3, 4, 5, 6, 7, 8, 9}) || !equalSeqs(src.lake, src.seqs) {
			t.Fatalf("read %v, from the lake %v", src.seqs, src.lake)
		}
		if _, err := be.GetLedgerRaw(ctx, 10); !errors.Is(err, ErrInvalid) {
			t.Fatalf("past the range: %v", err)
		}
	})

	t.Run("in neither", func(t *testing.T) {
		noLeaks(t)
		be, err := NewBackend(b.url(), WithLake(lakeURL(b))) // B's lake is B's ring
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		err = be.PrepareRange(ctx, UnboundedRange(1))
		var behind *TooFarBehindError
		if !errors.As(err, &behind) || behind.Requested != 1 || behind.Oldest < 20 ||
			!strings.Contains(err.Error(), "remoteledger: ledger 1 is in neither the lake nor the server's ring: the lake has no "+
				lakeURL(b)+"/ledgers/FFFFFFFF--0-63999/FFFFFFFE--1.xdr.zst (404: lake: batch 1-1 is not wholly in the ring: it holds ledgers ") ||
			!strings.Contains(err.Error(), fmt.Sprintf("; the server's ring holds [%d,%d]", behind.Oldest, behind.Latest)) {
			t.Fatalf("PrepareRange: %v", err)
		}
		if prepared(t, be, UnboundedRange(1)) {
			t.Fatal("prepared after the error")
		}
	})

	t.Run("directory", func(t *testing.T) {
		noLeaks(t)
		dir := writeLakeDir(t, a, 1, 12)
		// Ledger 5's object in three frames and a skippable one.
		raw := batchOf(5, ringFile(t, a, 5))
		multi := append(zstdCLI(t, raw[:7]), []byte{0x5F, 0x2A, 0x4D, 0x18, 0, 0, 0, 0}...)
		multi = append(append(multi, zstdCLI(t, raw[7:500])...), zstdCLI(t, raw[500:])...)
		if err := os.WriteFile(filepath.Join(dir, "ledgers", lakeKey(5, 1, 64000)), multi, 0o644); err != nil {
			t.Fatal(err)
		}
		be, src := lakeBackend(t, ctx, b, dir, BoundedRange(1, 14))
		for seq := uint32(1); seq <= 12; seq++ {
			l, err := be.GetLedgerRaw(ctx, seq)
			fromA(t, seq, l, err)
		}
		if !equalSeqs(src.lake, src.seqs) || len(src.seqs) != 12 {
			t.Fatalf("read %v, from the lake %v", src.seqs, src.lake)
		}
		_, err = be.GetLedgerRaw(ctx, 13)
		var behind *TooFarBehindError
		if !errors.As(err, &behind) || !strings.Contains(err.Error(), "the lake has no "+
			filepath.Join(dir, "ledgers", "FFFFFFFF--0-63999", "FFFFFFF2--13.xdr.zst")+"; the server's ring holds [") {
			t.Fatalf("ledger 13: %v", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		noLeaks(t)
		for _, c := range []struct{ config, want string }{
			{`{"networkPassphrase":"` + testnet + `","compression":"gzip","ledgersPerBatch":1,"batchesPerPartition":64000}`,
				`compression "gzip" is not supported: only zstd`},
			{`{"networkPassphrase":"` + testnet + `","compression":"zstd","ledgersPerBatch":4,"batchesPerPartition":2}`,
				"ledgersPerBatch 4 is not supported: a batch of more than one ledger cannot be split without decoding its XDR"},
			{`{"networkPassphrase":"` + testnet + `","compression":"zstd","ledgersPerBatch":0,"batchesPerPartition":2}`,
				"both must be at least 1"},
			{`{"networkPassphrase":"Public Global Stellar Network ; September 2015","compression":"zstd","ledgersPerBatch":1,"batchesPerPartition":64000}`,
				`network "Public Global Stellar Network ; September 2015", but the server streams network "` + testnet +
					`" (its ` + fmt.Sprintf("http://127.0.0.1:%d/lake/config.json", b.port) + `)`},
			{`[]`, "not a lake's configuration"},
		} {
			dir := writeLakeDir(t, a, 1, 1)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			be, err := NewBackend(b.url(), WithLake(dir))
			if err != nil {
				t.Fatal(err)
			}
			err = be.PrepareRange(ctx, SingleLedgerRange(1))
			be.Close()
			if !errors.Is(err, ErrLake) || !strings.Contains(err.Error(), "remoteledger: lake: "+filepath.Join(dir, "config.json")+": ") ||
				!strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want ErrLake with %q", c.config, err, c.want)
			}
		}
		be, err := NewBackend(b.url(), WithLake(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		if err := be.PrepareRange(ctx, SingleLedgerRange(1)); !errors.Is(err, ErrLake) ||
			!strings.Contains(err.Error(), "no config.json: not the root of a SEP-54 lake") {
			t.Errorf("an empty directory: %v", err)
		}
	})
}

// lakeBackend is a Backend of d's stream reading lake, prepared for r (closed at cleanup), and
// the record of where its ledgers came from.
func lakeBackend(t *testing.T, ctx context.Context, d *daemon, lake string, r Range) (*Backend, *lakeSource) {
	t.Helper()
	src := &lakeSource{}
	be, err := NewBackend(d.url(), WithLake(lake), WithObserver(src.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	if err := be.PrepareRange(ctx, r); err != nil {
		t.Fatal(err)
	}
	return be, src
}

// writeLakeDir is a directory lake of A's ledgers from to through, as A's lake serves them.
func writeLakeDir(t *testing.T, a *daemon, from, through uint32) string {
	t.Helper()
	dir := t.TempDir()
	get := func(u string) []byte {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", u, resp.Status, err)
		}
		return body
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), get(lakeURL(a)+"/config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for seq := from; seq <= through; seq++ {
		key := lakeKey(seq, 1, 64000)
		p := filepath.Join(dir, "ledgers", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, get(lakeURL(a)+"/ledgers/"+key), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	return dir
}

// A lake that does not answer: a PrepareRange waiting for it returns at its context's deadline,
// and Close interrupts one (ErrClosed) and returns once it has.
func TestLakeCancelAndClose(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0, "--start-ledger", "100")
	noLeaks(t)
	asked := make(chan struct{}, 4)
	mux := http.NewServeMux()
	mux.HandleFunc("/lake/config.json", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"networkPassphrase":"`+testnet+`","ledgersPath":"/lake/ledgers","compression":"zstd",`+
			`"ledgersPerBatch":1,"batchesPerPartition":64000}`)
	})
	mux.HandleFunc("/lake/ledgers/", func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		<-r.Context().Done() // never answers
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b, err := NewBackend(d.url(), WithLake(srv.URL+"/lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	err = b.PrepareRange(ctx, BoundedRange(5, 8))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("past its deadline: %v after %v", err, time.Since(start))
	}
	<-asked

	done := make(chan error, 1)
	go func() { done <- b.PrepareRange(context.Background(), BoundedRange(5, 8)) }()
	select {
	case <-asked:
	case <-time.After(waitFor):
		t.Fatal("the lake was not asked")
	}
	closeInterrupts(t, b, done, "PrepareRange")
}
