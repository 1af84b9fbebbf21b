// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildExample builds go/example as a module of its own in a scratch directory, importing this
// one by a replace directive (as a user's tree would before a release), and returns the binary.
func buildExample(t *testing.T) string {
	t.Helper()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(here, "..", "example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/rlexample\n\ngo 1.23\n\n" +
		"require github.com/corestream/corestream/go/remoteledger v0.0.0\n\n" +
		"replace github.com/corestream/corestream/go/remoteledger => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", "rlexample", ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	return filepath.Join(dir, "rlexample")
}

func syntheticSum(from, to uint32) string {
	sum := sha256.New()
	for seq := from; seq <= to; seq++ {
		sum.Write(synthetic(seq, 1000))
	}
	return fmt.Sprintf("%x", sum.Sum(nil))
}

// progressRun starts the example with -progress and calls at(seq) for each ledger line, until
// it returns false; the rest of the output is returned once the program exits.
func progressRun(t *testing.T, bin string, at func(seq uint32) bool, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-progress"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // a no-op once it has been waited for
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("rlexample ended: %v %q", err, line)
		}
		var seq uint32
		if _, err := fmt.Sscanf(line, "ledger %d\n", &seq); err != nil {
			t.Fatalf("rlexample printed %q", line)
		}
		if !at(seq) {
			break
		}
	}
	return cmd, func() string {
		rest, _ := io.ReadAll(r)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("rlexample: %v\n%s", err, rest)
		}
		var tail []string
		for _, l := range strings.Split(strings.TrimSpace(string(rest)), "\n") {
			if !strings.HasPrefix(l, "ledger ") {
				tail = append(tail, l)
			}
		}
		return strings.Join(tail, "\n")
	}
}

// The outside program: a bounded range byte-exact, a server restart survived with no gap or
// duplicate, a clean cancel on SIGINT, and an error reaching it.
func TestOutsideModule(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, 0)
	bin := buildExample(t)

	out, err := exec.Command(bin, "-url", d.url(), "-from", "1", "-to", "5").CombinedOutput()
	want := "range [1,5]: 5 ledgers, 5000 bytes, sha256 " + syntheticSum(1, 5) + ", 0 reconnects\n"
	if err != nil || string(out) != want {
		t.Fatalf("rlexample: %v %q, want %q", err, out, want)
	}

	// Killed and restarted on its port and data dir at the program's 10th ledger. The range
	// starts past the tip (the example's build took seconds, ledgers come every 20 ms), so the
	// rest of it is still to be emitted when the kill lands, not already in the socket.
	port := d.port
	from := ringLatest(t, dataDir) + 5
	to := from + 39
	next := from
	_, wait := progressRun(t, bin, func(seq uint32) bool {
		if seq != next {
			t.Fatalf("ledger %d, want %d", seq, next)
		}
		next++
		if seq == from+9 {
			d.stop(syscall.SIGKILL)
			d = startDaemon(t, dataDir, port, "--start-ledger", itoa(ringLatest(t, dataDir)+1))
			return false
		}
		return true
	}, "-url", d.url(), "-from", itoa(from), "-to", itoa(to), "-resume", "-1")
	tail := wait()
	prefix := "range [" + itoa(from) + "," + itoa(to) + "]: 40 ledgers, 40000 bytes, sha256 " +
		syntheticSum(from, to) + ", "
	if !strings.HasPrefix(tail, prefix) || strings.HasSuffix(tail, " 0 reconnects") {
		t.Fatalf("across the restart: %q, want %q and reconnects", tail, prefix)
	}

	// Ctrl-C on an unbounded stream.
	var cmd *exec.Cmd
	n := 0
	cmd, wait = progressRun(t, bin, func(uint32) bool { n++; return n < 3 }, "-url", d.url(), "-from", "0")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if tail := wait(); !strings.HasPrefix(tail, "cancelled after ") || time.Since(start) > 5*time.Second {
		t.Fatalf("after SIGINT: %q in %v", tail, time.Since(start))
	}

	out, err = exec.Command(bin, "-url", "ws://127.0.0.1:1", "-to", "2").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") {
		t.Fatalf("rlexample against a closed port: %v\n%s", err, out)
	}
}
