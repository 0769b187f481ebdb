package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// PreludeFile is written by the handler as soon as the launcher Pod's
// volumes are on the node: it tells the launcher to start its libvirtd
// while the handler still prepares the VM (its disks, its network),
// instead of after.
const PreludeFile = "prelude.json"

// Prelude is what a launcher needs before its spec: what its libvirtd
// starts with.
type Prelude struct {
	// QEMUCapabilities are as Spec's.
	QEMUCapabilities []string `json:"qemuCapabilities,omitempty"`
}

// EncodePrelude is the content of PreludeFile for p.
func EncodePrelude(p *Prelude) ([]byte, error) { return json.Marshal(p) }

// awaitPrelude waits for the prelude, or the spec if it comes first (a
// handler that writes no prelude), in dir. It returns nil, nil when the
// handler cancelled the launch or ctx ended first.
func awaitPrelude(ctx context.Context, dir string, poll time.Duration) (*Prelude, error) {
	for {
		data, err := os.ReadFile(filepath.Join(dir, PreludeFile))
		if err == nil {
			p := &Prelude{}
			if err := json.Unmarshal(data, p); err != nil {
				return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, PreludeFile), err)
			}
			return p, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		s, err := ReadSpec(dir)
		if err == nil {
			return &Prelude{QEMUCapabilities: s.QEMUCapabilities}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(dir, CancelFile)); err == nil {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(poll):
		}
	}
}

// daemon is the Pod's running libvirtd.
type daemon struct {
	uri  string
	stop func()
	warm *warmCache
}

// startDaemon starts the Pod's libvirtd with the node's QEMU capabilities
// the prelude names installed in its cache.
func (p *Pod) startDaemon(ctx context.Context, prelude *Prelude, log *slog.Logger) (*daemon, error) {
	l := &Libvirtd{RunDir: p.LibvirtdDir}
	warm := installCapabilities(prelude.QEMUCapabilities, l.CapabilitiesCache(), log)
	stop, err := startLibvirtd(ctx, l, log)
	if err != nil {
		return nil, err
	}
	return &daemon{uri: l.URI(), stop: stop, warm: warm}, nil
}
