package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"
)

// QEMUCapabilitiesCache is where a privileged libvirtd keeps what it probed
// of each QEMU binary (an unprivileged one: SessionCapabilitiesCache), one
// file per binary (<sha256 of its path>.xml).
// libvirt trusts a file there only while it matches the binary and
// libvirtd (their ctimes and versions), the host CPU and whether KVM is
// usable, and probes QEMU again otherwise.
const QEMUCapabilitiesCache = "/var/cache/libvirt/qemu/capabilities"

// MaxQEMUCapabilitiesBytes bounds one capabilities file (about 200 KiB for
// QEMU 7).
const MaxQEMUCapabilitiesBytes = 8 << 20

// IsQEMUCapabilitiesFile reports whether name can be a file of libvirt's
// capabilities cache: a plain name ending in .xml.
func IsQEMUCapabilitiesFile(name string) bool {
	return strings.HasSuffix(name, ".xml") && filepath.Base(name) == name && !strings.HasPrefix(name, ".")
}

// ProbeQEMU makes a libvirtd of the launcher's own (run directory runDir,
// configured as in a launcher Pod) probe the QEMU binaries it finds, and
// copies the capabilities files it wrote into out. Run with the launcher
// image as the same user as a launcher Pod, it makes once per
// node what every launcher there would probe again: the handler hands the
// files to each launcher Pod (Spec.QEMUCapabilities).
func ProbeQEMU(ctx context.Context, runDir, out string, log *slog.Logger) error {
	l := &Libvirtd{RunDir: runDir}
	cacheDir := l.CapabilitiesCache()
	start := time.Now()
	if err := l.Start(ctx, os.Stderr); err != nil {
		return err
	}
	defer l.Stop()
	conn, err := libvirt.NewConnect(l.URI())
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", l.URI(), err)
	}
	defer func() { _, _ = conn.Close() }()
	// The host capabilities list every QEMU binary libvirt found, so
	// building them probes each.
	if _, err := conn.GetCapabilities(); err != nil {
		return fmt.Errorf("probing QEMU: %w", err)
	}
	probed := time.Since(start)
	names, err := copyCapabilities(cacheDir, out)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("libvirtd probed QEMU but wrote nothing in %s", cacheDir)
	}
	log.Info("QEMU capabilities probed", "files", names, "took", probed.Round(time.Millisecond).String(), "into", out)
	return nil
}

// copyCapabilities copies the capabilities files of from into to (each
// written under a temporary name, then renamed) and returns their names.
func copyCapabilities(from, to string) ([]string, error) {
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, fmt.Errorf("reading libvirt's capabilities cache: %w", err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsQEMUCapabilitiesFile(e.Name()) {
			continue
		}
		data, err := readBounded(filepath.Join(from, e.Name()), MaxQEMUCapabilitiesBytes)
		if err != nil {
			return nil, err
		}
		if err := writeAtomic(filepath.Join(to, e.Name()), data); err != nil {
			return nil, err
		}
		names = append(names, e.Name())
	}
	return names, nil
}

// readBounded reads path, refusing a file larger than limit.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// warmCache holds the capabilities files a launcher installed.
type warmCache struct {
	dir   string
	files map[string]installed
}

// installed is a file as the launcher wrote it: libvirtd rewrites it in
// place (a new modification time) when it probes that QEMU again, usually
// with the same content.
type installed struct {
	data    []byte
	modTime time.Time
}

// installCapabilities copies the capabilities files at paths (the
// handler's, in the Pod's vm volume) into cacheDir, before libvirtd starts.
// A file that cannot be installed is left out: libvirtd then probes, as it
// would without any.
func installCapabilities(paths []string, cacheDir string, log *slog.Logger) *warmCache {
	w := &warmCache{dir: cacheDir, files: map[string]installed{}}
	if len(paths) == 0 {
		return w
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		log.Error("no QEMU capabilities cache", "err", err)
		return w
	}
	for _, p := range paths {
		name := filepath.Base(p)
		if !IsQEMUCapabilitiesFile(name) {
			log.Error("not a QEMU capabilities file", "path", p)
			continue
		}
		data, err := readBounded(p, MaxQEMUCapabilitiesBytes)
		if err == nil {
			err = writeAtomic(filepath.Join(cacheDir, name), data)
		}
		var st os.FileInfo
		if err == nil {
			st, err = os.Stat(filepath.Join(cacheDir, name))
		}
		if err != nil {
			log.Error("QEMU capabilities not installed", "path", p, "err", err)
			continue
		}
		w.files[name] = installed{data: data, modTime: st.ModTime()}
	}
	return w
}

// reused reports whether libvirtd kept every installed file: it rewrites
// one when it finds it stale and probes that QEMU again.
func (w *warmCache) reused() (bool, error) {
	if len(w.files) == 0 {
		return false, nil
	}
	for name, want := range w.files {
		path := filepath.Join(w.dir, name)
		st, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !st.ModTime().Equal(want.modTime) {
			return false, nil
		}
		got, err := readBounded(path, MaxQEMUCapabilitiesBytes)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(got, want.data) {
			return false, nil
		}
	}
	return true, nil
}

// report logs whether the domain started on the installed capabilities.
func (w *warmCache) report(log *slog.Logger) {
	if len(w.files) == 0 {
		log.Info("QEMU capabilities", "installed", 0, "reused", false)
		return
	}
	ok, err := w.reused()
	if err != nil {
		log.Error("checking the QEMU capabilities cache", "err", err)
		return
	}
	log.Info("QEMU capabilities", "installed", len(w.files), "reused", ok)
}
