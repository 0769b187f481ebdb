package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func TestGuestReads(t *testing.T) {
	sock := fakeAgent(t, func(cmd string, _ json.RawMessage) string {
		switch cmd {
		case "guest-info":
			return `{"return": {"version": "7.2.19", "supported_commands": [{"name": "guest-ping", "enabled": true}, {"name": "guest-exec", "enabled": false}]}}`
		case "guest-get-users":
			return `{"return": [{"user": "root", "login-time": 1764556800.5}]}`
		case "guest-get-fsinfo":
			return `{"return": [{"name": "vda1", "mountpoint": "/", "type": "ext4", "used-bytes": 100, "total-bytes": 1000, "disk": [{"serial": "abc", "bus-type": "virtio"}]}]}`
		case "guest-get-timezone":
			return `{"return": {"zone": "UTC", "offset": 0}}`
		case "guest-fsfreeze-freeze":
			return `{"return": 1}`
		case "guest-fsfreeze-thaw":
			return `{"return": 1}`
		case "guest-fsfreeze-status":
			return `{"return": "thawed"}`
		}
		return `{"error": {"class": "CommandNotFound", "desc": "` + cmd + `"}}`
	})
	ctx, c := synced(t, sock)
	info, err := c.Describe(ctx)
	if err != nil || info.Version != "7.2.19" || len(info.Commands) != 2 || info.Commands[1].Enabled {
		t.Errorf("Describe = %+v, %v", info, err)
	}
	users, err := c.Users(ctx)
	if err != nil || len(users) != 1 || users[0].Name != "root" || users[0].LoginTime != 1764556800.5 {
		t.Errorf("Users = %+v, %v", users, err)
	}
	fss, err := c.Filesystems(ctx)
	if err != nil || len(fss) != 1 || fss[0].Mountpoint != "/" || fss[0].TotalBytes != 1000 || fss[0].Disks[0].BusType != "virtio" {
		t.Errorf("Filesystems = %+v, %v", fss, err)
	}
	if zone, off, err := c.Timezone(ctx); err != nil || zone != "UTC" || off != 0 {
		t.Errorf("Timezone = %q %d %v", zone, off, err)
	}
	if n, err := c.Freeze(ctx); err != nil || n != 1 {
		t.Errorf("Freeze = %d, %v", n, err)
	}
	if n, err := c.Thaw(ctx); err != nil || n != 1 {
		t.Errorf("Thaw = %d, %v", n, err)
	}
	if s, err := c.FreezeStatus(ctx); err != nil || s != "thawed" {
		t.Errorf("FreezeStatus = %q, %v", s, err)
	}
}

// synced is a client of the agent at sock, synchronized, and a context
// that ends with the test (5 s at most).
func synced(t *testing.T, sock string) (context.Context, *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}
