package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCapacity(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name      string
		mem, disk uint64
		built     bool
		want      []string
	}{
		{"enough the first time", 8 * gi, 30 * gi, false, nil},
		{"enough later", 8 * gi, 6 * gi, true, nil},
		{"first run short of disk", 8 * gi, 10 * gi, false, []string{"20.0 GiB free on the file system of /h the first time", "it has 10.0 GiB", "TEKVIRT_HOME"}},
		{"later short of disk", 8 * gi, 1 * gi, true, []string{"5.0 GiB free", "for volumes and images"}},
		{"short of memory", 2 * gi, 30 * gi, false, []string{"4.0 GiB of memory, the machine has 2.0 GiB"}},
		{"short of both", 2 * gi, 1 * gi, true, []string{"of memory", "; and 5.0 GiB free"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCapacity(tc.mem, tc.disk, tc.built, "/h")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("checkCapacity: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkCapacity: nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkCapacity: %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestMemTotal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte("MemFree:  100 kB\nMemTotal:       24576000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := memTotal(p); err != nil || got != 24576000<<10 {
		t.Errorf("memTotal = %d, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("MemFree:  100 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := memTotal(p); err == nil {
		t.Error("memTotal of a file without MemTotal: nil error")
	}
}
