package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeAgent answers QGA commands on a unix socket the way qemu-ga does,
// after first leaving a stale reply on the stream.
func fakeAgent(t *testing.T, handle func(cmd string, args json.RawMessage) string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qga.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write([]byte(`{"return": {"stale": true}}` + "\n"))
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var req struct {
				Execute   string          `json:"execute"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				return
			}
			reply := handle(req.Execute, req.Arguments)
			if req.Execute == "guest-sync" {
				var a struct{ ID int64 }
				_ = json.Unmarshal(req.Arguments, &a)
				reply = `{"return": ` + jsonInt(a.ID) + `}`
			}
			_, _ = conn.Write([]byte(reply + "\n"))
		}
	}()
	return sock
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

func TestSyncExecAndErrors(t *testing.T) {
	polls := 0
	sock := fakeAgent(t, func(cmd string, args json.RawMessage) string {
		switch cmd {
		case "guest-exec":
			if strings.Contains(string(args), `"path":"/bin/missing"`) {
				return `{"error": {"class": "GenericError", "desc": "Failed to execute child process"}}`
			}
			return `{"return": {"pid": 42}}`
		case "guest-exec-status":
			polls++
			if polls < 3 {
				return `{"return": {"exited": false}}`
			}
			// "hi\n" and "err" in base64.
			return `{"return": {"exited": true, "exitcode": 7, "out-data": "aGkK", "err-data": "ZXJy"}}`
		}
		return `{"return": {}}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("sync past a stale reply: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, "/bin/echo", []string{"hi"}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout) != "hi\n" || string(res.Stderr) != "err" || polls != 3 {
		t.Fatalf("result = %+v after %d polls", res, polls)
	}
	_, err = c.Exec(ctx, "/bin/missing", nil, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "GenericError: Failed to execute child process") {
		t.Fatalf("err = %v", err)
	}
}

func TestExecTimesOut(t *testing.T) {
	sock := fakeAgent(t, func(cmd string, _ json.RawMessage) string {
		if cmd == "guest-exec" {
			return `{"return": {"pid": 9}}`
		}
		return `{"return": {"exited": false}}`
	})
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Exec(ctx, "/bin/sleep", []string{"100"}, 10*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "/bin/sleep") {
		t.Fatalf("err = %v, want ErrTimeout naming the program", err)
	}
}
