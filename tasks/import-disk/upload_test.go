package importdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tekvirt/tekvirt/contracts/upload"
)

func testKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// uploadFixture is an upload server for PVC ns/disk writing into a temp dir.
type uploadFixture struct {
	srv    *httptest.Server
	s      *uploadServer
	dir    string
	token  string
	priv   ed25519.PrivateKey
	cancel context.CancelFunc
}

func newUploadFixture(t *testing.T) *uploadFixture {
	t.Helper()
	pub, priv := testKey(t)
	dir := t.TempDir()
	p := Params{Dir: dir, Namespace: "ns", UploadClaim: "disk", UploadClaimUID: "uid-2", UploadPublicKey: base64.StdEncoding.EncodeToString(pub)}
	s := &uploadServer{p: p, pub: pub, prog: newProgress(io.Discard), now: time.Now, done: make(chan *Result, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(s.handler(ctx))
	t.Cleanup(func() { srv.Close(); cancel() })
	tok := upload.Sign(priv, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "disk", UID: "uid-2", Expires: time.Now().Add(time.Minute).Unix()})
	return &uploadFixture{srv: srv, s: s, dir: dir, token: tok, priv: priv, cancel: cancel}
}

func (f *uploadFixture) post(t *testing.T, path, token, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUploadRejectsBadTokensAndWritesNothing(t *testing.T) {
	f := newUploadFixture(t)
	otherPVC := upload.Sign(f.priv, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "other", UID: "uid-2", Expires: time.Now().Add(time.Minute).Unix()})
	expired := upload.Sign(f.priv, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "disk", UID: "uid-2", Expires: time.Now().Add(-time.Second).Unix()})
	// A token for the PVC of the same name that a deleted DataVolume had.
	earlier := upload.Sign(f.priv, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "disk", UID: "uid-1", Expires: time.Now().Add(time.Minute).Unix()})
	noUID := upload.Sign(f.priv, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "disk", Expires: time.Now().Add(time.Minute).Unix()})
	for name, tok := range map[string]string{"none": "", "garbage": "x.y.z", "other PVC": otherPVC, "expired": expired, "earlier PVC": earlier, "no UID": noUID} {
		code, msg := f.post(t, upload.Path, tok, "", bytes.NewReader(make([]byte, 4096)))
		if code != http.StatusUnauthorized || !strings.Contains(msg, "invalid upload token") {
			t.Errorf("%s: got %d %q, want 401 naming the token", name, code, msg)
		}
	}
	if entries, _ := os.ReadDir(f.dir); len(entries) != 0 {
		t.Fatalf("rejected uploads wrote %v", entries)
	}
}

func TestUploadBadDataKeepsOldDiskAndAllowsRetry(t *testing.T) {
	f := newUploadFixture(t)
	disk := filepath.Join(f.dir, DiskFile)
	old := bytes.Repeat([]byte("old!"), 1024)
	if err := os.WriteFile(disk, old, 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := gzipped(t, bytes.Repeat([]byte("new data"), 64<<10))
	code, msg := f.post(t, upload.Path, f.token, "", bytes.NewReader(truncated[:len(truncated)/2]))
	if code != http.StatusBadRequest || !strings.Contains(msg, "gz stream truncated") {
		t.Fatalf("truncated gzip: got %d %q", code, msg)
	}
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, old) {
		t.Fatal("a failed upload changed the old disk")
	}
	data := bytes.Repeat([]byte("new data"), 64<<10)
	if code, msg := f.post(t, upload.Path, f.token, "", bytes.NewReader(gzipped(t, data))); code != http.StatusOK {
		t.Fatalf("retry: got %d %q", code, msg)
	}
	res := <-f.s.done
	if res.Format != "raw" || res.VirtualSize != int64(len(data)) {
		t.Fatalf("result %+v", res.Result)
	}
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, data) {
		t.Fatal("disk.img does not hold the upload")
	}
}

func TestUploadFormAsync(t *testing.T) {
	f := newUploadFixture(t)
	data := bytes.Repeat([]byte{1, 2, 3, 4}, 256<<10)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("note", "ignored")
	fw, err := mw.CreateFormFile("file", "disk.raw")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(data)
	_ = mw.Close()
	if code, msg := f.post(t, upload.FormAsyncPath, f.token, mw.FormDataContentType(), &body); code != http.StatusOK {
		t.Fatalf("got %d %q", code, msg)
	}
	select {
	case res := <-f.s.done:
		if res.VirtualSize != int64(len(data)) {
			t.Fatalf("virtual size %d", res.VirtualSize)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the async upload did not finish")
	}
	if got, _ := os.ReadFile(filepath.Join(f.dir, DiskFile)); !bytes.Equal(got, data) {
		t.Fatal("disk.img does not hold the form's file")
	}
}

func TestUploadOneAtATime(t *testing.T) {
	f := newUploadFixture(t)
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		code, _ := f.post(t, upload.Path, f.token, "", pr)
		first <- code
	}()
	if _, err := pw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	// The bytes may sit in socket buffers before the handler runs.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.s.mu.Lock()
		busy := f.s.busy
		f.s.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first upload never started")
		}
	}
	code, msg := f.post(t, upload.Path, f.token, "", bytes.NewReader(make([]byte, 10)))
	if code != http.StatusConflict {
		t.Fatalf("second upload: got %d %q, want 409", code, msg)
	}
	_ = pw.Close()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first upload: %d", code)
	}
}
