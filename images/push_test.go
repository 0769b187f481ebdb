package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// sparseDisk is a 16 MiB file with boot at its start, data at its end and end and a hole between.
func sparseDisk(t *testing.T, boot string) (string, []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 16 << 20
	if _, err := f.WriteAt([]byte(boot), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("the end"), size-7); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, want
}

func TestPushContainerDiskRoundTrips(t *testing.T) {
	host := privateRegistry(t)
	disk, want := sparseDisk(t, "boot sector")
	var last Progress
	reg := &Registry{Ref: host + "/private/pushed:v1", Auth: &authn.Basic{Username: "user", Password: "pass"}}
	digest, err := PushContainerDisk(context.Background(), disk, reg, PushOptions{Progress: func(p Progress) { last = p }, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if last.Phase != "done" || last.Done != int64(len(want)) {
		t.Errorf("last progress %+v, want done with %d bytes", last, len(want))
	}
	// What the importer reads back is the disk, byte for byte.
	src := &RegistrySource{Registry: *reg}
	rc, size, err := src.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || size != int64(len(want)) || !bytes.Equal(got, want) || src.Digest != digest {
		t.Fatalf("read back %d bytes (size %d, digest %s, pushed %s), %v", len(got), size, src.Digest, digest, err)
	}
	// The layout KubeVirt's containerDisks have.
	img, err := crane.Pull(reg.Ref, crane.WithAuth(reg.Auth))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("config %+v, %v", cfg, err)
	}
	tr := tar.NewReader(mutate.Extract(img))
	var entries []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != ContainerDiskOwner || h.Gid != ContainerDiskOwner {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		entries = append(entries, h.Name)
	}
	if strings.Join(entries, ",") != "disk,disk/disk.img" {
		t.Errorf("layer holds %v", entries)
	}
	// The compressed layer is far smaller than the disk: holes cost little.
	layers, _ := img.Layers()
	if n, _ := layers[0].Size(); n > int64(len(want))/100 {
		t.Errorf("layer is %d bytes for a %d-byte sparse disk", n, len(want))
	}
}

func TestPushContainerDiskFailures(t *testing.T) {
	host := privateRegistry(t)
	disk, _ := sparseDisk(t, "boot sector")
	ctx := context.Background()
	_, err := PushContainerDisk(ctx, disk, &Registry{Ref: host + "/private/x:v1"}, PushOptions{Backoff: time.Millisecond})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "pushing to "+host+"/private/x:v1") {
		t.Errorf("no credentials: %v", err)
	}
	if _, err := PushContainerDisk(ctx, filepath.Join(t.TempDir(), "none"), &Registry{Ref: host + "/x:v1"}, PushOptions{}); err == nil || !strings.Contains(err.Error(), "the disk to push") {
		t.Errorf("missing disk: %v", err)
	}
	if _, err := PushContainerDisk(ctx, disk, &Registry{Ref: "UPPER/case:v1"}, PushOptions{}); err == nil || !strings.Contains(err.Error(), "UPPER/case") {
		t.Errorf("bad reference: %v", err)
	}
}

// TestPushContainerDiskRetries: a blob upload the network breaks is pushed
// again from the start, and the image arrives whole.
func TestPushContainerDiskRetries(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var broken atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && broken.Add(1) <= 2 {
			http.Error(w, "upstream reset", http.StatusBadGateway)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	disk, want := sparseDisk(t, "boot sector")
	r := &Registry{Ref: host + "/retried:v1"}
	if _, err := PushContainerDisk(context.Background(), disk, r, PushOptions{Backoff: time.Millisecond}); err != nil {
		t.Fatalf("push after two broken uploads: %v", err)
	}
	if n := broken.Load(); n < 3 {
		t.Errorf("%d uploads, want the two broken ones and a good one", n)
	}
	rc, _, err := (&RegistrySource{Registry: *r}).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, want) {
		t.Error("the retried push does not hold the disk")
	}
	// With one attempt, the broken upload is the error (another disk: the
	// registry has the first one's blob, which a retry inside one attempt
	// would find).
	broken.Store(0)
	other, _ := sparseDisk(t, "another boot sector")
	if _, err := PushContainerDisk(context.Background(), other, r, PushOptions{Attempts: 1}); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("one broken attempt: %v", err)
	}
}
