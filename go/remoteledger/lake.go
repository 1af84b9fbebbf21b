// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The library's defaults (rl_options' zero values), for the lake's HTTP requests, which Go
// makes itself.
const (
	defaultMaxMessageSize   = 256 << 20
	defaultDialTimeout      = 30 * time.Second
	defaultHandshakeTimeout = 10 * time.Second
	defaultIdleTimeout      = 60 * time.Second
	defaultBackoff          = 100 * time.Millisecond
	defaultBackoffMax       = 10 * time.Second
)

// lakeBatchHeader is the size of a LedgerCloseMetaBatch's startSequence, endSequence and count.
const lakeBatchHeader = 12

// WithLake makes a Backend read the ledgers its server's ring no longer holds from a SEP-54
// data lake (docs/LAKE.md): an http:// or https:// URL of the lake's root, the one holding
// config.json (a corestreamd's is http(s)://host:port/lake), or the path of a directory holding
// config.json and ledgers/<key> (what corestreamd's --lake-dir is to export). The lake is read
// only when the ring cannot serve a ledger: PrepareRange and GetLedgerRaw of a ledger before the
// ring's oldest (close 4001) or in a hole of it (close 4002) fetch its object, and the ledgers
// after it come from the ring again as soon as it holds them (docs/rpc-wiring.md, "History from a
// lake"). The Stream's WithBearerToken and TLS options apply to the lake's requests too, and
// WithResume and WithResumeBackoff to their retries (a 503, a failed connection). Only lakes of
// one ledger per batch (the public network lake's layout) are read. Refused by New with
// WithTrustedKeys (ErrInvalid): a lake's ledgers carry no signature to check. Stream.RawLedgers
// and Stream.Open do not read the lake.
func WithLake(url string) Option { return func(c *config) { c.lake = url } }

// lakeConfig is a lake's config.json (SEP-54).
type lakeConfig struct {
	NetworkPassphrase   string `json:"networkPassphrase"`
	LedgersPath         string `json:"ledgersPath"`
	Compression         string `json:"compression"`
	LedgersPerBatch     uint32 `json:"ledgersPerBatch"`
	BatchesPerPartition uint32 `json:"batchesPerPartition"`
}

// lake reads one SEP-54 lake, over HTTP (net/http) or from a directory. Used under a Backend's
// op lock only.
type lake struct {
	where  string   // the lake as WithLake named it, for messages
	dir    string   // a directory lake's path; "" for HTTP
	root   *url.URL // an HTTP lake's root, its path ending in "/"
	stream string   // the stream URL, whose server's own config.json names its network
	cfg    *config
	client *http.Client
	tr     *http.Transport

	layout  *lakeConfig // nil until config.json was read and accepted
	ledgers string      // where the objects are: a URL ending in "/", or a directory
}

// checkLake is New's check of WithLake: a URL of http or https with a host, or a path; never
// with WithTrustedKeys.
func checkLake(c *config) error {
	if c.lake == "" {
		return nil
	}
	if c.trustedKeys != "" {
		return fmt.Errorf("%w: WithLake with WithTrustedKeys: a lake's ledgers carry no signature, so they "+
			"could not be checked against the trusted keys", ErrInvalid)
	}
	if i := strings.Index(c.lake, "://"); i >= 0 {
		u, err := url.Parse(c.lake)
		switch {
		case err != nil:
			return fmt.Errorf("%w: lake %q: %v", ErrInvalid, c.lake, err)
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Errorf("%w: lake %q must use http or https, or be a directory's path", ErrInvalid, c.lake)
		case u.Host == "":
			return fmt.Errorf("%w: lake %q: no host", ErrInvalid, c.lake)
		}
	}
	return nil
}

// newLake is the lake of s's options, or nil without WithLake (checked by New).
func newLake(s *Stream) *lake {
	c := &s.cfg
	if c.lake == "" {
		return nil
	}
	l := &lake{where: c.lake, stream: s.url, cfg: c}
	if u, err := url.Parse(c.lake); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/"
		u.RawPath, u.RawQuery, u.Fragment = "", "", ""
		l.root = u
		l.where = strings.TrimSuffix(u.String(), "/")
	} else {
		l.dir = c.lake
	}
	dialer := &net.Dialer{Timeout: orDefault(c.dialTimeout, defaultDialTimeout), KeepAlive: 30 * time.Second}
	l.tr = &http.Transport{
		Proxy:                 nil, // as the library: straight to the host named
		DialContext:           l.dial(dialer, false),
		DialTLSContext:        l.dial(dialer, true),
		ResponseHeaderTimeout: orDefault(c.idleTimeout, defaultIdleTimeout),
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConnsPerHost:   2,
		DisableCompression:    true,
	}
	l.client = &http.Client{Transport: l.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer like any other status
	}}
	return l
}

// orDefault is an option's duration (ns): 0 the library's default, negative none (0 for Go).
func orDefault(ns int64, def time.Duration) time.Duration {
	switch {
	case ns == 0:
		return def
	case ns < 0:
		return 0
	}
	return time.Duration(ns)
}

// close drops the lake's idle connections (and so their goroutines).
func (l *lake) close() { l.tr.CloseIdleConnections() }

// dial connects for the lake's requests; for TLS it makes the configuration at each dial, so
// renewed CA and certificate files are read as the library reads them.
func (l *lake) dial(d *net.Dialer, secure bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			kinds := []error{ErrLake, ErrDial}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				kinds = append(kinds, ErrDialTimeout)
			}
			return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: dial %s: %v", addr, err), kinds: kinds,
				retry: true}
		}
		if !secure {
			return conn, nil
		}
		tc, err := l.tlsConfig(addr)
		if err != nil {
			conn.Close()
			return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: dial %s: %v", addr, err),
				kinds: []error{ErrLake, ErrTLS}}
		}
		hctx, cancel := ctx, func() {}
		if t := orDefault(l.cfg.handshakeTimeout, defaultHandshakeTimeout); t > 0 {
			hctx, cancel = context.WithTimeout(ctx, t)
		}
		defer cancel()
		c := tls.Client(conn, tc)
		if err := c.HandshakeContext(hctx); err != nil {
			conn.Close()
			if ctx.Err() == nil && hctx.Err() != nil {
				return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: dial %s: handshake timeout: no TLS "+
					"handshake within %v", addr, orDefault(l.cfg.handshakeTimeout, defaultHandshakeTimeout)),
					kinds: []error{ErrLake, ErrHandshakeTimeout, ErrDial}, retry: true}
			}
			return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: dial %s: %v", addr, err),
				kinds: []error{ErrLake, ErrTLS}}
		}
		return c, nil
	}
}

// tlsConfig is the Stream's TLS options for a connection to addr.
func (l *lake) tlsConfig(addr string) (*tls.Config, error) {
	c := l.cfg
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName,
		InsecureSkipVerify: c.insecureSkipVerify}
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tc.ServerName = host
	}
	if c.caFile != "" || c.caDir != "" {
		tc.RootCAs = x509.NewCertPool()
		files := []string{}
		if c.caFile != "" {
			files = append(files, c.caFile)
		}
		if c.caDir != "" {
			entries, err := os.ReadDir(c.caDir)
			if err != nil {
				return nil, fmt.Errorf("CA directory: %v", err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					files = append(files, filepath.Join(c.caDir, e.Name()))
				}
			}
		}
		for _, f := range files {
			pem, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("CA file: %v", err)
			}
			if !tc.RootCAs.AppendCertsFromPEM(pem) && f == c.caFile {
				return nil, fmt.Errorf("CA file %s: no certificate in it", f)
			}
		}
	}
	if c.certFile != "" {
		key := c.keyFile
		if key == "" {
			key = c.certFile
		}
		cert, err := tls.LoadX509KeyPair(c.certFile, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// lakeError is a failure to read the lake: its message, its kinds for errors.Is (always
// ErrLake), and whether a retry may succeed (a 503, a connection that failed).
type lakeError struct {
	msg        string
	kinds      []error
	retry      bool
	retryAfter time.Duration // a 503's Retry-After
}

func (e *lakeError) Error() string   { return e.msg }
func (e *lakeError) Unwrap() []error { return e.kinds }

// lakeMissing: the lake has no object for a batch (404, or no file in a directory lake).
type lakeMissing struct {
	where  string // the object's URL or path
	detail string // what the lake said, if anything
}

func (e *lakeMissing) Error() string {
	if e.detail != "" {
		return fmt.Sprintf("remoteledger: lake: %s is not in the lake (404: %s)", e.where, e.detail)
	}
	return fmt.Sprintf("remoteledger: lake: %s is not in the lake", e.where)
}

// open reads and checks config.json once: compression zstd, a sane layout of one ledger per
// batch, and the network of the stream's server when that server serves a config.json of its
// own (a corestreamd with --network-passphrase).
func (l *lake) open(ctx context.Context) error {
	if l.layout != nil {
		return nil
	}
	where, body, err := l.fetch(ctx, "config.json", 1<<20)
	if err != nil {
		var miss *lakeMissing
		if errors.As(err, &miss) {
			return &lakeError{msg: fmt.Sprintf("remoteledger: lake: %s: no config.json: not the root of a SEP-54 lake",
				where), kinds: []error{ErrLake}}
		}
		return err
	}
	bad := func(format string, a ...any) error {
		return &lakeError{msg: fmt.Sprintf("remoteledger: lake: %s: ", where) + fmt.Sprintf(format, a...),
			kinds: []error{ErrLake}}
	}
	var lc lakeConfig
	if err := json.Unmarshal(body, &lc); err != nil {
		return bad("not a lake's configuration: %v", err)
	}
	switch {
	case lc.Compression != "zstd":
		return bad("compression %q is not supported: only zstd", lc.Compression)
	case lc.LedgersPerBatch == 0 || lc.BatchesPerPartition == 0:
		return bad("ledgersPerBatch %d and batchesPerPartition %d: both must be at least 1", lc.LedgersPerBatch,
			lc.BatchesPerPartition)
	case uint64(lc.LedgersPerBatch)*uint64(lc.BatchesPerPartition) > 1<<32-1:
		return bad("a partition of %d batches of %d ledgers is over 4294967295 ledgers", lc.BatchesPerPartition,
			lc.LedgersPerBatch)
	case lc.LedgersPerBatch != 1:
		return bad("ledgersPerBatch %d is not supported: a batch of more than one ledger cannot be split without "+
			"decoding its XDR (only lakes of one ledger per batch are read)", lc.LedgersPerBatch)
	case lc.NetworkPassphrase == "":
		return bad("no networkPassphrase")
	}
	if l.dir != "" {
		l.ledgers = filepath.Join(l.dir, "ledgers")
	} else {
		p := lc.LedgersPath
		if p == "" {
			p = "ledgers"
		}
		u, err := l.root.Parse(strings.TrimSuffix(p, "/") + "/")
		if err != nil || u.Host != l.root.Host || u.Scheme != l.root.Scheme {
			return bad("ledgersPath %q is not a path of this lake", lc.LedgersPath)
		}
		l.ledgers = u.String()
	}
	if err := l.sameNetwork(ctx, where, &lc); err != nil {
		return err
	}
	l.layout = &lc
	return nil
}

// sameNetwork checks the lake's networkPassphrase against the one the stream's server serves
// in its own /lake/config.json. A server without one (404: no --network-passphrase) is not
// checked against.
func (l *lake) sameNetwork(ctx context.Context, where string, lc *lakeConfig) error {
	u, err := url.Parse(l.stream)
	if err != nil {
		return nil // New accepted it; the library parses it its own way
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	p := u.Path
	if p == "" || p == "/" {
		p = "/stream"
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = path.Join(path.Dir(p), "lake/config.json"), "", "", ""
	body, err := l.get(ctx, u.String(), 1<<20)
	var miss *lakeMissing
	switch {
	case errors.As(err, &miss):
		return nil
	case err != nil:
		return err
	}
	var server lakeConfig
	if err := json.Unmarshal(body, &server); err != nil || server.NetworkPassphrase == "" {
		return nil // not a corestreamd's lake configuration: nothing to compare with
	}
	if server.NetworkPassphrase != lc.NetworkPassphrase {
		return &lakeError{msg: fmt.Sprintf("remoteledger: lake: %s: network %q, but the server streams network %q "+
			"(its %s)", where, lc.NetworkPassphrase, server.NetworkPassphrase, u.String()), kinds: []error{ErrLake}}
	}
	return nil
}

// lakeKey is SEP-54's object key of seq's batch: the partition directory (when a partition holds
// more than one batch), then the batch, each named by 0xFFFFFFFF minus its first ledger in 8
// upper-case hex digits, "--", its first ledger and, for more than one ledger, "-" and its last.
func lakeKey(seq, perBatch, perPartition uint32) string {
	start := seq - seq%perBatch
	name := fmt.Sprintf("%08X--%d", 0xFFFFFFFF-start, start)
	if perBatch > 1 {
		name += fmt.Sprintf("-%d", start+perBatch-1)
	}
	name += ".xdr.zst"
	if perPartition > 1 {
		size := perBatch * perPartition
		first := seq - seq%size
		name = fmt.Sprintf("%08X--%d-%d/", 0xFFFFFFFF-first, first, first+size-1) + name
	}
	return name
}

// ledger is ledger seq from the lake, in Go memory: its batch's object fetched, every zstd frame
// of it decoded, the LedgerCloseMetaBatch header checked (seq to seq, one ledger). Errors:
// *lakeMissing when the lake has no such object, a *lakeError (ErrLake) otherwise, ctx.Err().
func (l *lake) ledger(ctx context.Context, seq uint32) ([]byte, error) {
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	limit := l.cfg.maxMessageSize
	if limit == 0 {
		limit = defaultMaxMessageSize
	}
	if limit > 0 {
		limit += lakeBatchHeader
	}
	wire := limit
	if wire > 0 {
		wire += wire/128 + 64<<10 // zstd's worst case over the raw bytes, with room for frame headers
	}
	key := lakeKey(seq, l.layout.LedgersPerBatch, l.layout.BatchesPerPartition)
	where, body, err := l.fetch(ctx, key, wire)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return &lakeError{msg: fmt.Sprintf("remoteledger: lake: %s: ", where) + fmt.Sprintf(format, a...),
			kinds: []error{ErrLake}}
	}
	raw, err := unzstd(body, limit)
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(raw) <= lakeBatchHeader {
		return nil, bad("%d bytes: not a LedgerCloseMetaBatch of one ledger", len(raw))
	}
	start, end, count := binary.BigEndian.Uint32(raw), binary.BigEndian.Uint32(raw[4:]), binary.BigEndian.Uint32(raw[8:])
	if start != seq || end != seq || count != 1 {
		return nil, bad("holds ledgers %d to %d (%d of them), not ledger %d alone", start, end, count, seq)
	}
	return raw[lakeBatchHeader:], nil
}

// fetch reads name (relative to the lake's ledgers for an object, to its root for config.json)
// whole, at most limit bytes (limit <= 0: no bound), retrying a 503 or a failed connection as
// WithResume retries a stream (its budget, WithResumeBackoff's waits, at least a 503's
// Retry-After). It returns where it read it, for messages.
func (l *lake) fetch(ctx context.Context, name string, limit int64) (where string, body []byte, err error) {
	if l.dir != "" {
		where = filepath.Join(l.dir, filepath.FromSlash(name))
		if name != "config.json" {
			where = filepath.Join(l.ledgers, filepath.FromSlash(name))
		}
		body, err = readLakeFile(where, limit)
		return where, body, err
	}
	where = l.root.String() + name
	if name != "config.json" {
		where = l.ledgers + name
	}
	for attempt := int64(1); ; attempt++ {
		body, err = l.get(ctx, where, limit)
		var le *lakeError
		if err == nil || !errors.As(err, &le) || !le.retry || ctx.Err() != nil {
			return where, body, err
		}
		if budget := l.cfg.resumeRetries; budget >= 0 && attempt > budget {
			return where, nil, err
		}
		t := time.NewTimer(l.backoff(attempt, le.retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return where, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is the wait before retry n, as the library's: min(initial*2^(n-1), max) with a random
// half taken off, and at least a 503's Retry-After (up to max).
func (l *lake) backoff(n int64, retryAfter time.Duration) time.Duration {
	initial, max := time.Duration(l.cfg.resumeBackoff), time.Duration(l.cfg.resumeBackoffMax)
	if initial <= 0 {
		initial = defaultBackoff
	}
	if max <= 0 {
		max = defaultBackoffMax
	}
	d := max
	if n < 40 && initial<<(n-1) < max && initial<<(n-1) > 0 {
		d = initial << (n - 1)
	}
	d -= time.Duration(rand.Int64N(int64(d)/2 + 1))
	if retryAfter > d {
		d = min(retryAfter, max)
	}
	return d
}

// get is one GET of u: the body of a 200 (at most limit bytes), *lakeMissing for a 404, a
// *lakeError otherwise (retry set for a 503 and a failed connection).
func (l *lake) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: %v", u, err), kinds: []error{ErrLake}}
	}
	if t := l.cfg.bearerToken; t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var le *lakeError
		if errors.As(err, &le) {
			return nil, le
		}
		return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: %v", u, err),
			kinds: []error{ErrLake, ErrRead}, retry: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		r := io.Reader(resp.Body)
		if limit > 0 {
			r = io.LimitReader(resp.Body, limit+1)
		}
		body, err := io.ReadAll(r)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: reading the answer: %v", u, err),
				kinds: []error{ErrLake, ErrRead}, retry: true}
		case limit > 0 && int64(len(body)) > limit:
			return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: the answer is over %d bytes "+
				"(WithMaxMessageSize)", u, limit), kinds: []error{ErrLake}}
		}
		return body, nil
	}
	said, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	detail := strings.TrimSpace(strings.SplitN(string(said), "\n", 2)[0])
	status := resp.Status
	if detail != "" {
		status += ": " + detail
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, &lakeMissing{where: u, detail: detail}
	case http.StatusServiceUnavailable:
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: %s", u, status),
			kinds: []error{ErrLake}, retry: true, retryAfter: time.Duration(after) * time.Second}
	case http.StatusUnauthorized:
		return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: %s", u, status),
			kinds: []error{ErrLake, ErrUnauthorized, ErrDial}}
	}
	return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: GET %s: %s", u, status), kinds: []error{ErrLake}}
}

// readLakeFile is a directory lake's file, at most limit bytes; *lakeMissing when absent.
func readLakeFile(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &lakeMissing{where: name}
	}
	if err != nil {
		return nil, &lakeError{msg: "remoteledger: lake: " + err.Error(), kinds: []error{ErrLake}}
	}
	defer f.Close()
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	body, err := io.ReadAll(r)
	switch {
	case err != nil:
		return nil, &lakeError{msg: "remoteledger: lake: " + err.Error(), kinds: []error{ErrLake}}
	case limit > 0 && int64(len(body)) > limit:
		return nil, &lakeError{msg: fmt.Sprintf("remoteledger: lake: %s is over %d bytes (WithMaxMessageSize)", name,
			limit), kinds: []error{ErrLake}}
	}
	return body, nil
}
