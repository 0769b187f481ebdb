package launcher

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestIsQEMUCapabilitiesFile(t *testing.T) {
	for name, want := range map[string]bool{
		"926803a9278e445ec919c2b6cbd8c1c449c75b26dcb1686b774314180376c725.xml": true,
		"x.xml":           true,
		"x.xml.tmp":       false,
		"launch.json":     false,
		"../x.xml":        false,
		"a/x.xml":         false,
		".x.xml":          false,
		"/etc/passwd.xml": false,
	} {
		if got := IsQEMUCapabilitiesFile(name); got != want {
			t.Errorf("IsQEMUCapabilitiesFile(%q) = %v, want %v", name, got, want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCopyCapabilities(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeFile(t, filepath.Join(from, "a.xml"), "<qemuCaps/>")
	writeFile(t, filepath.Join(from, "notes.txt"), "no")
	if err := os.Mkdir(filepath.Join(from, "d.xml"), 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := copyCapabilities(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"a.xml"}) {
		t.Errorf("copied %v, want [a.xml]", names)
	}
	if data, err := os.ReadFile(filepath.Join(to, "a.xml")); err != nil || string(data) != "<qemuCaps/>" {
		t.Errorf("a.xml copied as %q, %v", data, err)
	}
	if _, err := copyCapabilities(filepath.Join(from, "none"), to); err == nil {
		t.Error("copying from a missing cache succeeded")
	}
}

// TestWarmCache installs files as the launcher does before libvirtd starts
// and checks how reused tells libvirtd's rewrites (same content, new
// time), removals and edits from files it kept.
func TestWarmCache(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	published := t.TempDir()
	good := filepath.Join(published, "a.xml")
	writeFile(t, good, "<qemuCaps>a</qemuCaps>")
	big := filepath.Join(published, "big.xml")
	if err := os.WriteFile(big, make([]byte, MaxQEMUCapabilitiesBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(published, "launch.json")
	writeFile(t, bad, "{}")
	past := time.Now().Add(-time.Hour)

	tests := []struct {
		name   string
		after  func(t *testing.T, cache string)
		reused bool
	}{
		{"kept", func(*testing.T, string) {}, true},
		{"rewritten with the same content", func(t *testing.T, cache string) {
			writeFile(t, filepath.Join(cache, "a.xml"), "<qemuCaps>a</qemuCaps>")
			if err := os.Chtimes(filepath.Join(cache, "a.xml"), past, past); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"removed", func(t *testing.T, cache string) {
			if err := os.Remove(filepath.Join(cache, "a.xml")); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "capabilities")
			w := installCapabilities([]string{good, big, bad, filepath.Join(published, "missing.xml")}, cache, log)
			if len(w.files) != 1 {
				t.Fatalf("installed %d files, want only a.xml", len(w.files))
			}
			if data, err := os.ReadFile(filepath.Join(cache, "a.xml")); err != nil || string(data) != "<qemuCaps>a</qemuCaps>" {
				t.Fatalf("a.xml installed as %q, %v", data, err)
			}
			tt.after(t, cache)
			got, err := w.reused()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.reused {
				t.Errorf("reused = %v, want %v", got, tt.reused)
			}
		})
	}
	t.Run("nothing installed", func(t *testing.T) {
		w := installCapabilities(nil, filepath.Join(t.TempDir(), "capabilities"), log)
		if ok, err := w.reused(); ok || err != nil {
			t.Errorf("reused = %v, %v with nothing installed", ok, err)
		}
	})
}
