// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// scripted is a WebSocket server on 127.0.0.1 that answers the upgrade and then sends the given
// messages (wire messages as binary frames, or a close frame), for the errors a real corestreamd
// never causes. It reads until the client hangs up.
func scripted(t *testing.T, frames ...[]byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"+
			"Connection: Upgrade\r\nSec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(h[:])+"\r\n\r\n"); err != nil {
			return
		}
		for _, f := range frames {
			if _, err := c.Write(f); err != nil {
				return
			}
		}
		_, _ = io.Copy(io.Discard, c)
	}()
	return "ws://" + ln.Addr().String()
}

// frame is one unmasked server frame (payloads under 126 bytes).
func frame(opcode byte, payload []byte) []byte {
	return append([]byte{0x80 | opcode, byte(len(payload))}, payload...)
}

func begin(seq uint32) []byte {
	b := []byte{2, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[2:], seq)
	return frame(2, b)
}

// xxh64Empty is XXH64 of no bytes, seed 0: the checksum of an empty ledger.
const xxh64Empty = 0xEF46DB3751D8E999

// end closes an empty ledger (no chunks) with checksum sum.
func end(seq uint32, sum uint64) []byte {
	b := make([]byte, 34)
	b[0], b[1] = 2, 0x12
	binary.BigEndian.PutUint32(b[2:], seq)
	binary.BigEndian.PutUint64(b[26:], sum)
	return frame(2, b)
}

func closeFrame(code uint16, reason string) []byte {
	return frame(8, append(binary.BigEndian.AppendUint16(nil, code), reason...))
}

func TestProtocolErrors(t *testing.T) {
	noLeaks(t)
	for _, c := range []struct {
		name    string
		frames  [][]byte
		ledgers int
		kind    error
		msg     string
	}{
		{"gap", [][]byte{begin(1), end(1, xxh64Empty), begin(3)}, 1, ErrGap,
			"remoteledger: ledger sequence gap: got ledger 3, expected 2"},
		{"checksum", [][]byte{begin(1), end(1, 1)}, 0, ErrProtocol,
			"remoteledger: protocol violation: ledger 1 checksum mismatch: got 0xef46db3751d8e999, want 0x0000000000000001"},
		{"source failed", [][]byte{begin(1), end(1, xxh64Empty), closeFrame(1011, "source failed")}, 1, ErrRead,
			`remoteledger: read: failed to get reader: received close frame: status = StatusInternalError and reason = "source failed"`},
		{"truncated", [][]byte{begin(1), end(1, xxh64Empty), closeFrame(1000, "source ended")}, 1, ErrTruncated,
			"remoteledger: stream ended before the requested range was delivered: got through ledger 1, requested through 5"},
		{"too far behind", [][]byte{closeFrame(4001, "too far behind: oldest=7 latest=9")}, 0, ErrTooFarBehind,
			"remoteledger: requested ledger is behind the server's retention: requested 1, server retains [7,9]"},
		{"hole", [][]byte{begin(1), end(1, xxh64Empty), closeFrame(4002, "missing from the ring: first=2 last=3")}, 1, ErrHole,
			"remoteledger: ledgers 2 to 3 are missing from the server's ring (requested 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(scripted(t, c.frames...))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			var got error
			for b, err := range s.RawLedgers(context.Background(), BoundedRange(1, 5)) {
				if err != nil {
					got = err
					continue
				}
				if len(b) != 0 {
					t.Fatalf("ledger of %d bytes", len(b))
				}
				n++
			}
			if n != c.ledgers || !errors.Is(got, c.kind) || got.Error() != c.msg {
				t.Fatalf("%d ledgers, then %v; want %d, then %v %q", n, got, c.ledgers, c.kind, c.msg)
			}
		})
	}
}

// zeroFrame is a zstd frame of n zero bytes (n > 0) that says its content size: RLE blocks of at
// most 128 KiB, a few hundred bytes for 8 MiB, as a server could send it.
func zeroFrame(n int) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0} // magic; single segment, 4-byte content size
	f = binary.LittleEndian.AppendUint32(f, uint32(n))
	for n > 0 {
		size := min(n, 128<<10)
		n -= size
		h := uint32(size)<<3 | 1<<1 // RLE block
		if n == 0 {
			h |= 1 // last
		}
		f = append(f, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return f
}

// chunk is one CHUNK of a zstd payload, as a frame with a 16-bit length.
func chunk(seq, idx uint32, payload []byte) []byte {
	b := []byte{2, 0x11}
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, idx)
	b = append(b, 1)
	b = append(b, payload...)
	return append(binary.BigEndian.AppendUint16([]byte{0x82, 126}, uint16(len(b))), b...)
}

// endOf closes a ledger of count chunks, total bytes and checksum sum.
func endOf(seq, count uint32, total, sum uint64) []byte {
	b := make([]byte, 34)
	b[0], b[1] = 2, 0x12
	binary.BigEndian.PutUint32(b[2:], seq)
	binary.BigEndian.PutUint32(b[6:], count)
	binary.BigEndian.PutUint64(b[10:], total)
	binary.BigEndian.PutUint64(b[26:], sum)
	return frame(2, b)
}

// A few hundred bytes that inflate to 8 MiB, 40 times over: WithMaxChunkSize refuses the first
// chunk from its frame header, and a chunk exactly at the bound passes.
func TestMaxChunkSizeRefusesInflation(t *testing.T) {
	noLeaks(t)
	bomb := [][]byte{begin(10)}
	for i := range 40 {
		bomb = append(bomb, chunk(10, uint32(i), zeroFrame(8<<20)))
	}
	s, err := New(scripted(t, bomb...), WithMaxChunkSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	var got error
	for _, err := range s.RawLedgers(context.Background(), UnboundedRange(10)) {
		got = err
	}
	const want = "remoteledger: protocol violation: ledger 10 chunk 0 inflates to 8388608 bytes, " +
		"over the chunk bound of 262144 (max_chunk_size)"
	if !errors.Is(got, ErrProtocol) || got.Error() != want {
		t.Fatalf("got %v, want ErrProtocol %q", got, want)
	}

	const xxh64Zeros256K = 0xd79c0e35a60f2740
	s, err = New(scripted(t, begin(10), chunk(10, 0, zeroFrame(256<<10)), endOf(10, 1, 256<<10, xxh64Zeros256K)),
		WithMaxChunkSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for b, err := range s.RawLedgers(context.Background(), SingleLedgerRange(10)) {
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 256<<10 {
			t.Fatalf("ledger of %d bytes", len(b))
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d ledgers", n)
	}
}
