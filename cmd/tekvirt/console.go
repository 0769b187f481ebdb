package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	wsclient "k8s.io/client-go/transport/websocket"
)

// escapeByte (Ctrl+]) leaves the console, as in virtctl and telnet.
const escapeByte = 29

// consoleCmd attaches the terminal to a VMI's serial console through the
// subresources API (virtualmachineinstances/console), as virtctl console
// does.
func consoleCmd(g *globalFlags) *cobra.Command {
	var ns string
	cmd := &cobra.Command{Use: "console NAME", Short: "Attach to a VMI's serial console (Ctrl+] leaves)", Args: cobra.ExactArgs(1),
		Example: "  tekvirt console demo",
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dialConsole(cmd.Context(), ns, args[0])
			if err != nil {
				return fmt.Errorf("console of VMI %s/%s: %w", ns, args[0], err)
			}
			defer func() { _ = conn.Close() }()
			fmt.Fprintf(cmd.ErrOrStderr(), "Connected to the console of VMI %s/%s. The escape sequence is ^]\n", ns, args[0])
			if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
				state, err := term.MakeRaw(fd)
				if err != nil {
					return fmt.Errorf("making the terminal raw: %w", err)
				}
				defer func() { _ = term.Restore(fd, state) }()
			}
			return attach(conn, cmd.InOrStdin(), cmd.OutOrStdout())
		}}
	namespaceFlag(cmd.Flags(), &ns, "namespace of the VMI")
	return cmd
}

// dialConsole opens the VMI's console websocket, authenticated as the
// kubeconfig says (certificates, tokens or exec plugins alike).
func (g *globalFlags) dialConsole(ctx context.Context, ns, name string) (*gwebsocket.Conn, error) {
	_, cfg, err := g.kubeClient()
	if err != nil {
		return nil, err
	}
	rt, holder, err := wsclient.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances/" + name + "/console"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return wsclient.Negotiate(rt, holder, req, "plain.kubevirt.io")
}

// errEscape ends attach when the user typed the escape byte.
var errEscape = errors.New("escape")

// attach copies in to the console and the console to out until in sends
// the escape byte or ends, or the console closes.
func attach(conn *gwebsocket.Conn, in io.Reader, out io.Writer) error {
	done := make(chan error, 2)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := in.Read(buf)
			if i := strings.IndexByte(string(buf[:n]), escapeByte); i >= 0 {
				n, err = i, errEscape
			}
			if n > 0 {
				if werr := conn.WriteMessage(gwebsocket.BinaryMessage, buf[:n]); werr != nil {
					done <- werr
					return
				}
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				done <- err
				return
			}
			if _, err := out.Write(data); err != nil {
				done <- err
				return
			}
		}
	}()
	err := <-done
	if errors.Is(err, errEscape) || errors.Is(err, io.EOF) || gwebsocket.IsCloseError(err, gwebsocket.CloseNormalClosure) {
		return nil
	}
	return err
}
