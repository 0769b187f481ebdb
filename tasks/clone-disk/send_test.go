package clonedisk

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSend(t *testing.T) {
	src := t.TempDir()
	data := append(bytes.Repeat([]byte("disk"), 1000), make([]byte, 1<<20)...)
	if err := os.WriteFile(filepath.Join(src, DiskFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var calls int
	var got []byte
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		switch {
		case r.Header.Get("Authorization") != "Bearer good":
			http.Error(w, "invalid upload token", http.StatusUnauthorized)
		case calls == 1:
			http.Error(w, "not UploadReady", http.StatusServiceUnavailable)
		default:
			got, _ = io.ReadAll(r.Body)
		}
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	p := SendParams{SourceDir: src, URL: srv.URL + "/v1beta1/upload", ServerName: "example.com", CAFile: ca, Token: "good", Attempts: 3, Backoff: time.Millisecond}
	var out bytes.Buffer
	if err := Send(context.Background(), p, &out); err != nil {
		t.Fatalf("Send: %v\n%s", err, out.String())
	}
	if calls != 2 || !bytes.Equal(got, data) || !strings.Contains(out.String(), "503") {
		t.Fatalf("calls %d, %d bytes received; log:\n%s", calls, len(got), out.String())
	}
	calls = 0
	p.Token = "bad"
	if err := Send(context.Background(), p, &out); err == nil || !strings.Contains(err.Error(), "invalid upload token") || calls != 1 {
		t.Errorf("a refused token: %v after %d calls, want one call", err, calls)
	}
	p.SourceDir = t.TempDir()
	if err := Send(context.Background(), p, &out); err == nil || !strings.Contains(err.Error(), "source volume has no disk.img") {
		t.Errorf("no source disk: %v", err)
	}
}
