// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const waitFor = 20 * time.Second

// daemon is a corestreamd started from $CORESTREAMD on 127.0.0.1, its output kept.
type daemon struct {
	t       *testing.T // nil for TestMain's
	cmd     *exec.Cmd
	dataDir string
	port    int
	log     *logBuf
	exited  chan struct{}
}

type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var listeningRE = regexp.MustCompile(`corestreamd listening.* addr="?[^" ]*:([0-9]+)`)

// daemonBin is the binary under test; the tests that need it skip without it (the ctest sets it).
func daemonBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CORESTREAMD")
	if bin == "" {
		t.Skip("CORESTREAMD is not set: point it at a corestreamd binary to run the end-to-end tests")
	}
	return bin
}

// startDaemon runs corestreamd with a fast synthetic source (a 1000-byte ledger every 20 ms)
// on dataDir, listening on port (0: ephemeral), with extra flags; it is stopped at cleanup.
func startDaemon(t *testing.T, dataDir string, port int, extra ...string) *daemon {
	t.Helper()
	args := []string{"--source", "synthetic", "--synthetic-interval", "20ms", "--emit-window", "0",
		"--synthetic-size", "1000"}
	return startDaemonSource(t, dataDir, port, append(args, extra...)...)
}

// startDaemonSource runs corestreamd on dataDir, listening on port (0: ephemeral), with the
// source and every other flag given by args; it is stopped at cleanup.
func startDaemonSource(t *testing.T, dataDir string, port int, args ...string) *daemon {
	t.Helper()
	d, err := launch(daemonBin(t), dataDir, port, args...)
	if err != nil {
		t.Fatal(err)
	}
	d.t = t
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	return d
}

// launch runs corestreamd (bin) on dataDir, listening on 127.0.0.1:port (0: ephemeral), with
// args, and returns once it listens. The caller stops it.
func launch(bin, dataDir string, port int, args ...string) (*daemon, error) {
	base := []string{"--data-dir=" + dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", port)}
	d := &daemon{dataDir: dataDir, log: &logBuf{}, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, append(base, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start corestreamd: %v", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(waitFor)
	for {
		if m := listeningRE.FindStringSubmatch(d.log.String()); m != nil {
			d.port, _ = strconv.Atoi(m[1])
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("corestreamd exited before listening:\n%s", d.log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop(syscall.SIGKILL)
			return nil, fmt.Errorf("corestreamd not listening within %v:\n%s", waitFor, d.log.String())
		}
	}
}

func (d *daemon) url() string { return fmt.Sprintf("ws://127.0.0.1:%d", d.port) }

// stop signals the daemon and waits for it to exit (SIGKILL after waitFor). Idempotent.
func (d *daemon) stop(sig syscall.Signal) {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGCONT)
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(waitFor):
		_ = d.cmd.Process.Kill()
		<-d.exited
		if d.t != nil {
			d.t.Errorf("corestreamd did not exit on %v", sig)
		}
	}
}

func (d *daemon) signal(sig syscall.Signal) {
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal corestreamd: %v", err)
	}
}

// ringLatest is the newest ledger the ring in dataDir holds whole (its ledger and its record).
func ringLatest(t *testing.T, dataDir string) uint32 {
	t.Helper()
	// A ledger file is renamed into place only once its record is in the segment's log
	// (docs/RING.md), so the newest ledger-<seq>.xdr is the ring's latest.
	names, err := filepath.Glob(filepath.Join(dataDir, "ledgers", "ledger-*.xdr"))
	if err != nil {
		t.Fatal(err)
	}
	var latest uint32
	for _, n := range names {
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "ledger-"), ".xdr"), 10, 32)
		if err == nil && uint32(seq) > latest {
			latest = uint32(seq)
		}
	}
	return latest
}

// synthetic is the payload corestreamd's synthetic source sends for seq (incompressible): the
// sequence big-endian, then little-endian draws of Go's PCG seeded (seq, 0x5CE11A8).
func synthetic(seq uint32, size int) []byte {
	b := make([]byte, size)
	if size < 4 {
		return b
	}
	binary.BigEndian.PutUint32(b, seq)
	rng := mrand.NewPCG(uint64(seq), 0x5CE11A8)
	var w [8]byte
	for i := 4; i < size; i += 8 {
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// noLeaks checks, at cleanup, that every C stream was freed and the goroutines are back to
// the count at the call (waiting a bounded time for exiting ones).
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		if n := liveStreams.Load(); n != 0 {
			t.Errorf("%d C streams not freed", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// waitLatest waits until the server's ring holds ledger seq.
func waitLatest(t *testing.T, s *Stream, seq uint32) {
	t.Helper()
	waitBounds(t, s, func(_, latest uint32) bool { return latest >= seq })
}

// waitBounds waits until the server's retained bounds satisfy done.
func waitBounds(t *testing.T, s *Stream, done func(oldest, latest uint32) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		oldest, latest, err := s.Bounds(ctx)
		if err != nil {
			t.Fatalf("bounds: %v", err)
		}
		if done(oldest, latest) {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling the server's ring: there is no event to await
	}
}

// certs writes a CA and a server certificate for 127.0.0.1 (and "corestream.test") to dir.
func certs(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caFile, certFile, keyFile, err := writeCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, certFile, keyFile
}

// writeCerts is certs without a test: ca.pem, server.pem and server.key in dir.
func writeCerts(dir string) (caFile, certFile, keyFile string, err error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "corestream.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"corestream.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if werr := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); werr != nil && err == nil {
			err = werr
		}
		return p
	}
	caFile, certFile, keyFile = write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der),
		write("server.key", "EC PRIVATE KEY", keyDER)
	return caFile, certFile, keyFile, err
}
