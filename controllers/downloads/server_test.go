package downloads

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServer(t *testing.T) {
	dir := t.TempDir()
	for p, data := range map[string]string{"amd64/linux/tekvirt": "amd64 binary", "arm64/linux/tekvirt": "arm64 binary"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link out of the tree is not served.
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func(p string) (int, string, http.Header) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	sum := sha256.Sum256([]byte("arm64 binary"))
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/arm64/linux/tekvirt", "arm64 binary", 200},
		{"/amd64/linux/../linux/tekvirt", "amd64 binary", 200},
		{"/", "/amd64/linux/tekvirt\n/arm64/linux/tekvirt\n", 200},
		{"/SHA256SUMS", hex.EncodeToString(sum[:]) + "  arm64/linux/tekvirt\n", 200},
		{"/passwd", "404", 404},
		{"/../../etc/passwd", "404", 404},
		{"/amd64", "404", 404},
	} {
		code, body, _ := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	if _, _, h := get("/amd64/linux/tekvirt"); h.Get("Content-Disposition") != `attachment; filename="tekvirt"` {
		t.Errorf("headers %v", h)
	}
	if _, err := New(t.TempDir()); err == nil {
		t.Error("an empty tree was accepted")
	}
}
