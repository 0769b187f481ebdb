package launcher

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNetNSHandOver: what the handler receives is the launcher's own
// network namespace.
func TestNetNSHandOver(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = serveNetNS(ctx, dir, slog.New(slog.DiscardHandler)) }()
	var c net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err = net.Dial("unix", filepath.Join(dir, NetNSSocket)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := ReceiveNetNS(c)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var got, want unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &got); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &want); err != nil {
		t.Fatal(err)
	}
	if got.Ino != want.Ino || got.Dev != want.Dev {
		t.Fatalf("received namespace %d, the launcher's is %d", got.Ino, want.Ino)
	}
	if _, err := os.Stat(filepath.Join(dir, NetNSSocket)); err != nil {
		t.Fatal(err)
	}
}
