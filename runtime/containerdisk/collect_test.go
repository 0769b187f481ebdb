package containerdisk

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func TestFetchCapsAnImage(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	// 3 MiB of zeros: a layer of a few KiB.
	big := push(t, host, "big", map[string][]byte{"disk/a.raw": make([]byte, 2<<20), "disk/b.raw": make([]byte, 1<<20)})
	cache := Cache{Dir: t.TempDir(), MaxImageBytes: 2<<20 + 1<<19}
	_, err := cache.Fetch(context.Background(), big)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 2621440 bytes") {
		t.Fatalf("err = %v, want ErrTooLarge naming the cap", err)
	}
	if entries, _ := os.ReadDir(cache.Dir); len(entries) != 0 {
		t.Errorf("a refused image left %v in the cache", entries)
	}
	cache.MaxImageBytes = 3 << 20
	if _, err := cache.Fetch(context.Background(), big); err != nil {
		t.Errorf("an image at the cap: %v", err)
	}
}

func TestCollect(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	mk := func(name string, complete bool, age time.Duration) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		marker := p
		if complete {
			marker = filepath.Join(p, completeFile)
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(marker, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	mk("old-unused", true, 48*time.Hour)
	mk("old-in-use", true, 48*time.Hour)
	mk("recent", true, time.Hour)
	mk(fetchPrefix+"stale", false, 48*time.Hour)
	mk(fetchPrefix+"running", false, time.Minute)
	mk("no-marker", false, 48*time.Hour)
	removed, err := Cache{Dir: dir}.Collect(map[string]bool{"old-in-use": true}, 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{fetchPrefix + "stale", "old-unused"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, keep := range []string{"old-in-use", "recent", fetchPrefix + "running", "no-marker"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
}

func TestFetchMarksUse(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := push(t, strings.TrimPrefix(srv.URL, "http://"), "guest", map[string][]byte{"disk/d.raw": []byte("x")})
	cache := Cache{Dir: t.TempDir()}
	im, err := cache.Fetch(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour)
	if err := os.Chtimes(filepath.Join(im.Dir, completeFile), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Fetch(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if removed, err := cache.Collect(nil, 24*time.Hour, time.Now()); err != nil || len(removed) != 0 {
		t.Errorf("an image fetched again just now was collected: %v %v", removed, err)
	}
}
