// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"syscall"
	"testing"
	"time"
)

var runRE = regexp.MustCompile(`corestreamd listening.* run=([^ \n]+)`)

// run is the daemon's run token, from its listening line.
func (d *daemon) run() string {
	d.t.Helper()
	m := runRE.FindStringSubmatch(d.log.String())
	if m == nil {
		d.t.Fatalf("no run= on the listening line:\n%s", d.log.String())
	}
	return m[1]
}

// restarted is what restartedSession saw.
type restarted struct {
	seqs    []uint32
	err     error     // nil when the range was delivered whole
	runs    [2]string // the Session's Run before the restart and at the end
	daemons [2]string // the two daemons' runs
	port    int
}

// restartedSession pulls [1,60] with resume through a Session, SIGKILLs the daemon after ledger
// 10 and starts another on the same port and restartDir ("": the same data dir), and pulls on
// until the range is done or an error.
func restartedSession(t *testing.T, restartDir string, opts ...Option) (r restarted) {
	t.Helper()
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, 0)
	r.port = d.port
	r.daemons[0] = d.run()
	if restartDir == "" {
		restartDir = dataDir
	}
	s, _ := New(d.url(), append([]Option{WithResume(100),
		WithResumeBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	p, err := s.Open(ctx, BoundedRange(1, 60))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer p.Close()
	r.runs[0] = p.Run()
	for {
		_, info, e := p.Next(ctx)
		if e != nil {
			if !errors.Is(e, io.EOF) {
				r.err = e
			}
			break
		}
		r.seqs = append(r.seqs, info.Sequence)
		if len(r.seqs) == 10 {
			d.stop(syscall.SIGKILL)
			d = startDaemon(t, restartDir, r.port, "--start-ledger", itoa(info.Sequence+1))
			r.daemons[1] = d.run()
		}
	}
	r.runs[1] = p.Run()
	return r
}

// A restart on the same data dir is the same run: the token is kept and the session resumes.
func TestResumeKeepsTheRunOnItsDataDir(t *testing.T) {
	noLeaks(t)
	r := restartedSession(t, "")
	if r.err != nil {
		t.Fatalf("after %v: %v", r.seqs, r.err)
	}
	wantSeqs(t, r.seqs, 1, 60)
	if r.daemons[0] != r.daemons[1] || r.runs[0] != r.daemons[0] || r.runs[1] != r.daemons[0] {
		t.Fatalf("runs: session %q, daemons %q", r.runs, r.daemons)
	}
}

// A restart on a fresh data dir with the same flags is another run (issue 28: its ledgers were
// accepted after the first run's): the resume ends with ErrRunChanged, naming both tokens, after
// the first run's ledgers and none of the new server's; WithAllowRunChange goes on, on the new
// run.
func TestResumeRefusesAnotherRun(t *testing.T) {
	noLeaks(t)
	r := restartedSession(t, t.TempDir())
	if !errors.Is(r.err, ErrRunChanged) || errors.Is(r.err, ErrDial) || errors.Is(r.err, ErrProtocol) {
		t.Fatalf("after %v: %v, want ErrRunChanged", r.seqs, r.err)
	}
	if r.daemons[0] == r.daemons[1] {
		t.Fatalf("a fresh data dir kept the run %q", r.daemons[0])
	}
	if len(r.seqs) < 10 || r.seqs[len(r.seqs)-1] >= 60 {
		t.Fatalf("ledgers %v", r.seqs)
	}
	last := r.seqs[len(r.seqs)-1]
	wantSeqs(t, r.seqs, 1, last)
	want := fmt.Sprintf("remoteledger: dial ws://127.0.0.1:%d/stream?end=60&start=%d: run changed: the server is "+
		"now run %s, the session began on run %s", r.port, last+1, r.daemons[1], r.daemons[0])
	if r.err.Error() != want {
		t.Fatalf("error %q, want %q", r.err, want)
	}
	if r.runs[0] != r.daemons[0] || r.runs[1] != r.daemons[0] {
		t.Fatalf("session runs %q, daemons %q", r.runs, r.daemons)
	}

	r = restartedSession(t, t.TempDir(), WithAllowRunChange())
	if r.err != nil {
		t.Fatalf("allowed: after %v: %v", r.seqs, r.err)
	}
	wantSeqs(t, r.seqs, 1, 60)
	if r.daemons[0] == r.daemons[1] || r.runs[0] != r.daemons[0] || r.runs[1] != r.daemons[1] {
		t.Fatalf("allowed: session runs %q, daemons %q", r.runs, r.daemons)
	}
}
