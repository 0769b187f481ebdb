package podnet

import (
	"context"
	"fmt"
	"net"
	"os"
)

// Listen listens on addr inside the Pod's network namespace ns (a launcher
// Pod's, never the node's): a listener on the Pod's loopback that neither
// the node nor the Pod network reaches.
func Listen(ns *os.File, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(ns, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in the Pod's network namespace: %w", addr, err)
	}
	return l, nil
}

// Dial connects to addr from inside the Pod's network namespace ns.
func Dial(ctx context.Context, ns *os.File, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(ns, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s in the Pod's network namespace: %w", addr, err)
	}
	return c, nil
}
