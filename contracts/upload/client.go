package upload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client uploads images through an upload proxy, as virtctl image-upload.
type Client struct {
	// URL of the proxy, e.g. https://cdi-uploadproxy.example:443.
	URL  string
	HTTP *http.Client
}

// Upload sends size bytes of r (-1: unknown) with token. Async returns once
// the proxy has the data; otherwise once the disk is written.
func (c *Client) Upload(ctx context.Context, token string, r io.Reader, size int64, async bool) error {
	path := Path
	if async {
		path = AsyncPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+path, r)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", c.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("upload proxy answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
