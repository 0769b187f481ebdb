package launcher

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "kubevirt.io/api/core/v1"
)

// TestAttachRequestCarriesTheDisk sends a disk's descriptor across a real
// unix socket as the handler does: the launcher's side gets the request
// and the same open file, and the handler the answer.
func TestAttachRequestCarriesTheDisk(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(disk, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, HotplugSocketFile), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan error, 1)
	go func() {
		conn, err := l.AcceptUnix()
		if err != nil {
			got <- err
			return
		}
		defer conn.Close()
		req, f, err := readAttachRequest(conn)
		if err != nil {
			got <- err
			return
		}
		defer f.Close()
		var a, b unix.Stat_t
		_ = unix.Fstat(int(f.Fd()), &a)
		_ = unix.Stat(disk, &b)
		reply := AttachReply{Target: "sdb"}
		if a.Ino != b.Ino || req.Disk.Name != "data" || req.Disk.Serial != "s1" {
			reply = AttachReply{Error: "not the disk sent"}
		}
		data, _ := json.Marshal(reply)
		_, err = conn.Write(append(data, '\n'))
		got <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := net.Dial("unix", filepath.Join(dir, HotplugSocketFile))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	target, err := AttachDisk(ctx, conn, AttachRequest{Disk: v1.Disk{Name: "data", Serial: "s1"}, Format: "raw"}, f)
	if err != nil || target != "sdb" {
		t.Errorf("attach: target %q, %v", target, err)
	}
	if err := <-got; err != nil {
		t.Error(err)
	}
}

// TestAttachRequestWithoutDisk: a request that carries no descriptor (a
// tenant's own client in the Pod) is refused.
func TestAttachRequestWithoutDisk(t *testing.T) {
	a, b, err := unixPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	go func() { _, _ = b.Write([]byte(`{"disk":{"name":"x"}}` + "\n")) }()
	if _, _, err := readAttachRequest(a); err == nil {
		t.Error("a request without a disk descriptor was taken")
	}
}

func unixPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := conn(fds[1])
	return a, b, err
}
