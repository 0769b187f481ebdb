package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// NetNSSocket is where a launcher hands its network namespace to the
// node's handler, which builds the guest's interfaces there before it
// writes the spec (KubeVirt's first phase, from outside the Pod).
const NetNSSocket = "netns.sock"

// serveNetNS answers every connection on dir/NetNSSocket with the Pod's
// network namespace, as a file descriptor, until ctx ends.
func serveNetNS(ctx context.Context, dir string, log *slog.Logger) error {
	path := filepath.Join(dir, NetNSSocket)
	_ = os.Remove(path)
	l, err := (&net.ListenConfig{}).Listen(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", path, err)
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := sendNetNS(c.(*net.UnixConn)); err != nil {
			log.Error("handing the network namespace over", "err", err)
		}
		c.Close()
	}
}

func sendNetNS(c *net.UnixConn) error {
	// Every thread of the launcher is in the Pod's namespace.
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer ns.Close()
	_, _, err = c.WriteMsgUnix([]byte{0}, unix.UnixRights(int(ns.Fd())), nil)
	return err
}

// ReceiveNetNS reads the network namespace a launcher hands over on c.
// The caller checks what it got: the Pod's tenant can put anything on the
// socket.
func ReceiveNetNS(c net.Conn) (*os.File, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("the network namespace comes over a unix socket")
	}
	_ = uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := uc.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		return nil, fmt.Errorf("reading the launcher's network namespace: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("the launcher's message: %w", err)
	}
	if len(msgs) != 1 {
		return nil, errors.New("the launcher sent no network namespace")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, fmt.Errorf("the launcher's message: %w", err)
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, fmt.Errorf("the launcher sent %d file descriptors, not its network namespace alone", len(fds))
	}
	return os.NewFile(uintptr(fds[0]), "netns"), nil
}
