package images

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTPSource downloads over HTTP(S). A connection that breaks mid-stream is
// resumed with a Range request when the server offers ranges (else the
// import fails: restarting would feed the pipeline the start twice), with
// exponential backoff between attempts.
type HTTPSource struct {
	URL string
	// Header is sent with every request (basic auth, tokens).
	Header http.Header
	// CA, PEM, is trusted besides the system roots.
	CA []byte
	// Attempts per request (default 5) and the first backoff (default 1s).
	Attempts int
	Backoff  time.Duration
	// Client overrides the HTTP client (tests).
	Client *http.Client
}

func (s *HTTPSource) String() string { return s.URL }

func (s *HTTPSource) client() (*http.Client, error) {
	if s.Client != nil {
		return s.Client, nil
	}
	if len(s.CA) == 0 {
		return http.DefaultClient, nil
	}
	tr, err := CATransport(s.CA)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr}, nil
}

// CATransport is an HTTP transport that trusts the PEM certificates in ca
// besides the system roots (a private registry's or server's CA).
func CATransport(ca []byte) (*http.Transport, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the custom CA holds no PEM certificate")
	}
	return &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, nil
}

// Open implements Source.
func (s *HTTPSource) Open(ctx context.Context) (io.ReadCloser, int64, error) {
	c, err := s.client()
	if err != nil {
		return nil, 0, err
	}
	r := &httpReader{ctx: ctx, s: s, c: c}
	if err := r.request(0); err != nil {
		return nil, 0, err
	}
	return r, r.size, nil
}

type httpReader struct {
	ctx    context.Context
	s      *HTTPSource
	c      *http.Client
	body   io.ReadCloser
	off    int64
	size   int64
	ranges bool
}

func (r *httpReader) attempts() int { return max(1, orDefault(r.s.Attempts, 5)) }

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// request GETs from off, retrying transient failures.
func (r *httpReader) request(off int64) error {
	err := retry(r.ctx, r.attempts(), orDefault(r.s.Backoff, time.Second), func() (bool, error) { return r.get(off) })
	var gaveUp *exhaustedError
	if errors.As(err, &gaveUp) {
		return fmt.Errorf("GET %s: %w", r.s.URL, err)
	}
	return err
}

// get makes one request; it says whether a failure is worth retrying.
func (r *httpReader) get(off int64) (bool, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.s.URL, nil)
	if err != nil {
		return false, err
	}
	for k, v := range r.s.Header {
		req.Header[k] = v
	}
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return r.ctx.Err() == nil, fmt.Errorf("GET %s: %w", r.s.URL, err)
	}
	if retry, err := r.accept(resp, off); err != nil {
		resp.Body.Close()
		return retry, err
	}
	r.body = resp.Body
	return false, nil
}

// accept checks a response to a GET from off; it says whether a refused
// one is worth retrying.
func (r *httpReader) accept(resp *http.Response, off int64) (bool, error) {
	switch {
	case off > 0 && resp.StatusCode == http.StatusPartialContent:
		return false, nil
	case off == 0 && resp.StatusCode == http.StatusOK:
		r.size = resp.ContentLength
		r.ranges = strings.Contains(resp.Header.Get("Accept-Ranges"), "bytes")
		return false, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, fmt.Errorf("%w: GET %s: %s", ErrNotFound, r.s.URL, resp.Status)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return false, fmt.Errorf("GET %s: %s (check the credentials secret)", r.s.URL, resp.Status)
	case off > 0 && resp.StatusCode == http.StatusOK:
		return false, fmt.Errorf("GET %s: the server ignored the Range request; cannot resume at byte %d", r.s.URL, off)
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("GET %s: %s", r.s.URL, resp.Status)
}

// Read resumes after a broken connection when it can.
func (r *httpReader) Read(p []byte) (int, error) {
	for {
		n, err := r.body.Read(p)
		r.off += int64(n)
		if err == nil || errors.Is(err, io.EOF) {
			if errors.Is(err, io.EOF) && r.size >= 0 && r.off < r.size {
				err = io.ErrUnexpectedEOF // the connection closed early
			} else {
				return n, err
			}
		}
		if n > 0 {
			return n, nil // report the data; the error comes back on the next read
		}
		r.body.Close()
		if !r.ranges || r.ctx.Err() != nil {
			return 0, fmt.Errorf("GET %s: broken at byte %d and the server offers no ranges to resume: %w", r.s.URL, r.off, err)
		}
		if rerr := r.request(r.off); rerr != nil {
			return 0, fmt.Errorf("resuming at byte %d after %w: %w", r.off, err, rerr)
		}
	}
}

func (r *httpReader) Close() error {
	if r.body == nil {
		return nil
	}
	return r.body.Close()
}
