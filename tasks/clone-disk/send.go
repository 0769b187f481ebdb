package clonedisk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// SendParams send a volume's disk to an upload endpoint: the source half of
// a clone across namespaces (CDI's host-assisted clone), whose target half
// is an upload step in the target namespace.
type SendParams struct {
	SourceDir string
	// URL is the upload proxy's upload path; ServerName the name its
	// certificate is for when URL has an IP; CAFile the CA that signed it
	// (read from CA when empty).
	URL, ServerName, CAFile string
	CA                      func(context.Context) ([]byte, error)
	// Token authorizes the upload into the target PVC.
	Token string
	// Attempts is how often a refused (503) or broken send is tried.
	Attempts int
	Backoff  time.Duration
}

// Send posts SourceDir/disk.img, retrying while the target is not ready.
func Send(ctx context.Context, p SendParams, out io.Writer) error {
	src := filepath.Join(p.SourceDir, DiskFile)
	if _, err := os.Stat(src); err != nil {
		return &result.Failure{Err: fmt.Errorf("%w: source volume has no %s: %w", images.ErrNotFound, DiskFile, err)}
	}
	hc, err := sendClient(ctx, p)
	if err != nil {
		return err
	}
	attempts, backoff := max(p.Attempts, 1), p.Backoff
	for i := 1; ; i++ {
		start := time.Now()
		n, err := sendOnce(ctx, hc, p, src)
		if err == nil {
			fmt.Fprintf(out, "sent %d bytes to %s in %s\n", n, p.URL, time.Since(start).Round(time.Millisecond))
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || i >= attempts {
			return fmt.Errorf("sending %s: %w", src, err)
		}
		fmt.Fprintf(out, "send attempt %d failed (%v); retrying in %s\n", i, err, backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// permanentError is an answer a retry will not change (bad token, bad data).
type permanentError struct{ msg string }

func (e *permanentError) Error() string { return e.msg }

func sendOnce(ctx context.Context, hc *http.Client, p SendParams, src string) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, f)
	if err != nil {
		return 0, err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	switch resp.StatusCode {
	case http.StatusOK:
		return st.Size(), nil
	case http.StatusUnauthorized, http.StatusBadRequest, http.StatusNotFound:
		return 0, &permanentError{text}
	}
	return 0, errors.New(text)
}

func sendClient(ctx context.Context, p SendParams) (*http.Client, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	var pem []byte
	var err error
	switch {
	case p.CAFile != "":
		if pem, err = os.ReadFile(p.CAFile); err != nil {
			return nil, fmt.Errorf("reading the CA: %w", err)
		}
	case p.CA != nil:
		if pem, err = p.CA(ctx); err != nil {
			return nil, err
		}
	}
	if pem != nil {
		if tr, err = images.CATransport(pem); err != nil {
			return nil, fmt.Errorf("the upload server's CA: %w", err)
		}
	}
	tr.TLSClientConfig.ServerName = p.ServerName
	return &http.Client{Transport: tr}, nil
}
