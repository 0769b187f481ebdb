package agent

import (
	"context"
	"encoding/json"
	"testing"
)

func TestCredentialCommands(t *testing.T) {
	got := map[string]string{}
	sock := fakeAgent(t, func(cmd string, args json.RawMessage) string {
		got[cmd] = string(args)
		if cmd == "guest-ssh-get-authorized-keys" {
			return `{"return": {"keys": ["ssh-ed25519 AAAA a"]}}`
		}
		return `{"return": {}}`
	})
	ctx := context.Background()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAuthorizedKeys(ctx, "root", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.SetUserPassword(ctx, "guest", "s3cret"); err != nil {
		t.Fatal(err)
	}
	keys, err := c.AuthorizedKeys(ctx, "root")
	if err != nil || len(keys) != 1 || keys[0] != "ssh-ed25519 AAAA a" {
		t.Errorf("AuthorizedKeys = %v, %v", keys, err)
	}
	for cmd, want := range map[string]string{
		// An empty list with reset empties the file; null would be refused.
		"guest-ssh-add-authorized-keys": `{"keys":[],"reset":true,"username":"root"}`,
		"guest-set-user-password":       `{"crypted":false,"password":"czNjcmV0","username":"guest"}`,
		"guest-ssh-get-authorized-keys": `{"username":"root"}`,
	} {
		if got[cmd] != want {
			t.Errorf("%s arguments %s, want %s", cmd, got[cmd], want)
		}
	}
}
