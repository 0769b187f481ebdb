package podnet

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNotPodNamespace means the file given is not a network namespace other
// than the caller's own (the node's, for a handler on the host network).
var ErrNotPodNamespace = errors.New("not a Pod's network namespace")

// ownNamespace is the network namespace the process started in (the
// node's, for a handler on the host network), read before any thread could
// have joined another.
var ownNamespace, ownNamespaceErr = func() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Stat("/proc/self/ns/net", &st)
	return st, err
}()

// checkNamespace makes sure ns is a network namespace and not the one the
// process started in: whoever handed it over (a launcher Pod, which its
// tenant can exec into) must not get the node's network changed.
func checkNamespace(ns *os.File) error {
	typ, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPodNamespace, err)
	}
	if typ != unix.CLONE_NEWNET {
		return fmt.Errorf("%w: a namespace of type %#x", ErrNotPodNamespace, typ)
	}
	var given unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &given); err != nil {
		return err
	}
	if ownNamespaceErr != nil {
		return fmt.Errorf("the process's own network namespace: %w", ownNamespaceErr)
	}
	if given.Dev == ownNamespace.Dev && given.Ino == ownNamespace.Ino {
		return fmt.Errorf("%w: it is the node's own", ErrNotPodNamespace)
	}
	return nil
}

// inNamespace runs f on an OS thread that joined the network namespace ns;
// sockets f opens (netlink, nftables) and the net sysctls it writes are
// the namespace's. The thread goes back to the process's namespace after,
// or, if it cannot, ends with its goroutine.
func inNamespace(ns *os.File, f func() error) error {
	if err := checkNamespace(ns); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("joining the Pod's network namespace: %w", err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked: the runtime ends it with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leaving the Pod's network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// setSysctl writes a sysctl of the current thread's network namespace.
func setSysctl(name, value string) error {
	path := "/proc/sys/" + name
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s: %w", name, err)
	}
	return nil
}
