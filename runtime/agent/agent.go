package agent

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"time"
)

// Transport carries one QGA command (a JSON object) to the agent and
// returns its reply line.
type Transport interface {
	Command(ctx context.Context, cmd []byte) ([]byte, error)
}

// Client talks to one guest agent. It is not safe for concurrent use: QGA
// answers requests in order on one stream.
type Client struct {
	t Transport
}

// New returns a client over t, e.g. libvirt's agent channel.
func New(t Transport) *Client { return &Client{t: t} }

// socket is a Transport over the agent's unix socket, for a QEMU that
// libvirt does not manage.
type socket struct {
	conn net.Conn
	r    *bufio.Reader
}

// Dial connects to the agent socket at path. Call Sync before the first
// command.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connecting to guest agent socket %s: %w", path, err)
	}
	return &Client{t: &socket{conn: conn, r: bufio.NewReader(conn)}}, nil
}

// Close closes a socket connection; other transports have nothing to close.
func (c *Client) Close() error {
	if s, ok := c.t.(*socket); ok {
		return s.conn.Close()
	}
	return nil
}

func (s *socket) Command(ctx context.Context, cmd []byte) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = s.conn.SetDeadline(dl)
		defer func() { _ = s.conn.SetDeadline(time.Time{}) }()
	}
	if _, err := s.conn.Write(append(cmd, '\n')); err != nil {
		return nil, err
	}
	return s.r.ReadBytes('\n')
}

type request struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
}

type response struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
}

// CommandError is the agent's answer that a command failed (as opposed
// to no answer at all).
type CommandError struct{ Command, Class, Desc string }

func (e *CommandError) Error() string {
	return fmt.Sprintf("guest agent %s: %s: %s", e.Command, e.Class, e.Desc)
}

// call sends one command and decodes its return value into out.
func (c *Client) call(ctx context.Context, cmd string, args, out any) error {
	data, err := json.Marshal(request{Execute: cmd, Arguments: args})
	if err != nil {
		return err
	}
	line, err := c.t.Command(ctx, data)
	if err != nil {
		return fmt.Errorf("guest agent %s: %w", cmd, err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("guest agent %s: bad reply %q: %w", cmd, line, err)
	}
	if resp.Error != nil {
		return &CommandError{Command: cmd, Class: resp.Error.Class, Desc: resp.Error.Desc}
	}
	if out != nil {
		return json.Unmarshal(resp.Return, out)
	}
	return nil
}

// Sync discards stale replies on a socket stream (an agent restarted, or
// an earlier client gone mid-call) by waiting for the echo of a fresh id, as
// the protocol prescribes before the first command. Other transports (libvirt)
// synchronize themselves.
func (c *Client) Sync(ctx context.Context) error {
	s, ok := c.t.(*socket)
	if !ok {
		return c.Ping(ctx)
	}
	id := rand.Int64N(1 << 40)
	if dl, ok := ctx.Deadline(); ok {
		_ = s.conn.SetDeadline(dl)
		defer func() { _ = s.conn.SetDeadline(time.Time{}) }()
	}
	data, _ := json.Marshal(request{Execute: "guest-sync", Arguments: map[string]int64{"id": id}})
	if _, err := s.conn.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("guest agent guest-sync: %w", err)
	}
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("guest agent guest-sync: %w", err)
		}
		var resp struct {
			Return int64 `json:"return"`
		}
		if json.Unmarshal(line, &resp) == nil && resp.Return == id {
			return nil
		}
	}
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error { return c.call(ctx, "guest-ping", nil, nil) }

// Result is how a program run in the guest ended.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// Truncated is set when the agent cut the captured output.
	Truncated bool
}

// ErrTimeout is returned when a program outlives its context.
var ErrTimeout = errors.New("program in guest did not finish in time")

// Exec runs path with args in the guest, waits for it, and returns its exit
// code and output. poll sets how often guest-exec-status is asked.
func (c *Client) Exec(ctx context.Context, path string, args []string, poll time.Duration) (Result, error) {
	var started struct {
		PID int `json:"pid"`
	}
	err := c.call(ctx, "guest-exec", map[string]any{"path": path, "arg": args, "capture-output": true}, &started)
	if err != nil {
		return Result{}, err
	}
	for {
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			Signal   int    `json:"signal"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
			OutTrunc bool   `json:"out-truncated"`
			ErrTrunc bool   `json:"err-truncated"`
		}
		if err := c.call(ctx, "guest-exec-status", map[string]int{"pid": started.PID}, &st); err != nil {
			// The socket's deadline is the context's and may pass a moment
			// before the context reports it.
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				return Result{}, fmt.Errorf("%w: %s (pid %d in guest): %w", ErrTimeout, path, started.PID, err)
			}
			return Result{}, err
		}
		if st.Exited {
			res := Result{ExitCode: st.ExitCode, Truncated: st.OutTrunc || st.ErrTrunc}
			if st.Signal != 0 {
				res.ExitCode = 128 + st.Signal
			}
			res.Stdout, _ = base64.StdEncoding.DecodeString(st.OutData)
			res.Stderr, _ = base64.StdEncoding.DecodeString(st.ErrData)
			return res, nil
		}
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("%w: %s (pid %d in guest)", ErrTimeout, path, started.PID)
		case <-time.After(poll):
		}
	}
}
