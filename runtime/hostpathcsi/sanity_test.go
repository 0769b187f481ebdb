package hostpathcsi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// ids are volume and node IDs of the driver's form for the sanity suite.
type ids struct {
	node string
	n    atomic.Int64
}

func (g *ids) GenerateUniqueValidVolumeID() string {
	return location{Node: g.node, Name: fmt.Sprintf("missing-%d", g.n.Add(1))}.String()
}
func (g *ids) GenerateInvalidVolumeID() string   { return "not-a-tekvirt-volume" }
func (g *ids) GenerateUniqueValidNodeID() string { return fmt.Sprintf("node-%d", g.n.Add(1)) }
func (g *ids) GenerateInvalidNodeID() string     { return "not a node" }

// TestSanity runs Kubernetes' CSI sanity suite (csi-test) against the
// driver on a unix socket, as the kubelet and the sidecars call it. Its
// node tests mount, so it needs root.
func TestSanity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the node tests bind-mount volumes: run as root")
	}
	dir := t.TempDir()
	d := &Driver{Node: "sanity-node", Root: filepath.Join(dir, "root"), SharedRoot: filepath.Join(dir, "shared")}
	for _, r := range []string{d.Root, d.SharedRoot} {
		if err := os.MkdirAll(r, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, sock, "", "") }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.IDGen = &ids{node: d.Node}
	cfg.TestVolumeSize = 1 << 20
	sanity.Test(t, cfg)
}
