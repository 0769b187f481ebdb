package upload

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The client posts to CDI's paths with the token as bearer and the size
// as the length, and names the proxy's refusal.
func TestClientUpload(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		if r.ContentLength != int64(len(body)) {
			t.Errorf("length %d for %d bytes", r.ContentLength, len(body))
		}
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "token rejected", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL + "/", HTTP: srv.Client()}
	ctx := context.Background()
	if err := c.Upload(ctx, "good", strings.NewReader("disk"), 4, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, "good", strings.NewReader("disk"), 4, true); err != nil {
		t.Fatal(err)
	}
	err := c.Upload(ctx, "bad", strings.NewReader("disk"), 4, false)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "token rejected") {
		t.Errorf("a refused token: %v, want the proxy's status and message", err)
	}
	want := []string{"POST " + Path + " Bearer good disk", "POST " + AsyncPath + " Bearer good disk", "POST " + Path + " Bearer bad disk"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", got, want)
	}
}
