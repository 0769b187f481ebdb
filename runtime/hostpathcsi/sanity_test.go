package hostpathcsi

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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
	l, err := listenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx, slowAccept{l}, nil, "") }()
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

// slowAccept holds each connection a second before the server takes it.
// csi-test's Connect waits for the connection's state to change from the
// one it last read, so a connection that is Ready before its first look
// is never seen Ready: a minute's timeout, then a failed test, which CI
// met on a busy machine. A second in Connecting leaves it no such gap.
type slowAccept struct{ net.Listener }

func (l slowAccept) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		time.Sleep(time.Second)
	}
	return c, err
}
