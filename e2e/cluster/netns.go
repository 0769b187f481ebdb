package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread switched into the network namespace at
// path. The thread is never switched back: it ends with its goroutine, so
// no other goroutine runs in that namespace. Sockets fn opens stay in it.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the Go runtime ends a thread still locked
		// when its goroutine returns.
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// ListenIn listens on addr in the network namespace at path.
func ListenIn(path, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(path, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

func dialIn(ctx context.Context, path, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(path, func() (err error) {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// httpReadyIn is httpReady for a plain-HTTP endpoint in a node's network
// namespace (its loopback, which the host cannot reach otherwise).
func httpReadyIn(netns, url string) func(context.Context) error {
	return getOK(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, netns, addr) },
	}}, url)
}

// ForwardInto accepts connections on l and joins each to a new connection
// to target (dialled where the caller runs), until l is closed. It lets a
// node's loopback reach the registry on the host's, as the first node's
// containerd does, without exposing the registry to any pod.
func ForwardInto(l net.Listener, target string) error {
	for {
		in, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
