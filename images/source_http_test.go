package images

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// payload served by the test servers.
var payload = bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB

// breakAfter serves payload with ranges, but cuts the first `breaks`
// responses off after n bytes by closing the connection.
func breakAfter(t *testing.T, n int, breaks int32, acceptRanges bool) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := calls.Add(1)
		if call <= breaks {
			start := 0
			if rg := r.Header.Get("Range"); acceptRanges && rg != "" {
				_, _ = fmt.Sscanf(rg, "bytes=%d-", &start)
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(payload)-start))
			if acceptRanges {
				w.Header().Set("Accept-Ranges", "bytes")
			}
			if start > 0 {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(payload)-1, len(payload)))
				w.WriteHeader(http.StatusPartialContent)
			} else {
				w.WriteHeader(http.StatusOK)
			}
			_, _ = w.Write(payload[start:min(start+n, len(payload))])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if !acceptRanges && r.Header.Get("Range") != "" {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(payload)
			return
		}
		http.ServeContent(w, r, "disk.img", time.Time{}, bytes.NewReader(payload))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func readAll(t *testing.T, s Source) ([]byte, error) {
	t.Helper()
	rc, size, err := s.Open(context.Background())
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err == nil && size != int64(len(b)) {
		t.Errorf("size %d, read %d", size, len(b))
	}
	return b, err
}

func TestHTTPResumesAfterAReset(t *testing.T) {
	srv, calls := breakAfter(t, 300_000, 2, true)
	got, err := readAll(t, &HTTPSource{URL: srv.URL, Backoff: time.Millisecond})
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if calls.Load() != 3 {
		t.Errorf("%d requests, want 3 (two broken, one resumed)", calls.Load())
	}
}

func TestHTTPFailures(t *testing.T) {
	var down atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Add(1) == 1 {
			w.Header().Set("Accept-Ranges", "bytes")
			w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
			_, _ = w.Write(payload[:1000])
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	if _, err := readAll(t, &HTTPSource{URL: srv.URL, Attempts: 3, Backoff: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") || !strings.Contains(err.Error(), "502") {
		t.Errorf("reset, then the server stays down: err = %v", err)
	}
	noRanges, _ := breakAfter(t, 300_000, 1, false)
	if _, err := readAll(t, &HTTPSource{URL: noRanges.URL, Backoff: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "offers no ranges") {
		t.Errorf("no ranges: err = %v", err)
	}
	var calls atomic.Int32
	notFound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.NotFound(w, nil)
	}))
	defer notFound.Close()
	if _, err := readAll(t, &HTTPSource{URL: notFound.URL, Backoff: time.Millisecond}); !errors.Is(err, ErrNotFound) || calls.Load() != 1 {
		t.Errorf("404: err = %v after %d requests, want ErrNotFound at once", err, calls.Load())
	}
	var flaky atomic.Int32
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		http.ServeContent(w, r, "d", time.Time{}, bytes.NewReader(payload))
	}))
	defer unavailable.Close()
	if got, err := readAll(t, &HTTPSource{URL: unavailable.URL, Backoff: time.Millisecond}); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("503 twice then OK: %d bytes, %v", len(got), err)
	}
}

func TestHTTPHeadersAndCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "secret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		http.ServeContent(w, r, "d", time.Time{}, bytes.NewReader(payload))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.SetBasicAuth("user", "secret")
	if got, err := readAll(t, &HTTPSource{URL: srv.URL, CA: ca, Header: req.Header}); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("with CA and auth: %d bytes, %v", len(got), err)
	}
	if _, err := readAll(t, &HTTPSource{URL: srv.URL, CA: ca}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without auth: err = %v", err)
	}
	if _, err := readAll(t, &HTTPSource{URL: srv.URL, Attempts: 1}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: err = %v", err)
	}
}
