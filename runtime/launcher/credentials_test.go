package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF1hdQN35rm7+cqDLwRsj6LKShfxDw9T3X34jRB3TOMb a"

type fakeAgent struct {
	writes int
	err    error
}

func (f *fakeAgent) SetAuthorizedKeys(context.Context, string, []string) error {
	f.writes++
	return f.err
}

func (f *fakeAgent) SetUserPassword(context.Context, string, string) error { return nil }

func TestCredentialsSync(t *testing.T) {
	dir := t.TempDir()
	write := func(data string) {
		if err := os.MkdirAll(filepath.Join(dir, "0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0", "key"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &credentials{path: func(i int) string { return filepath.Join(dir, strconv.Itoa(i)) }, creds: []v1.AccessCredential{{
		SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source: v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "keys"}},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{
				QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"root"}}}}}}}
	ctx := context.Background()
	a := &fakeAgent{}
	write(testKey)
	steps := []struct {
		name      string
		connected bool
		change    func()
		synced    bool
		message   string
		writes    int
	}{
		{name: "agent offline", message: "Guest agent is offline"},
		{name: "agent up: written", connected: true, synced: true, writes: 1},
		{name: "nothing changed: not written again", connected: true, synced: true, writes: 1},
		{name: "the Secret changed", connected: true, change: func() { write(testKey + "\n" + testKey) }, synced: true, writes: 2},
		{name: "garbage: the user is left alone", connected: true, change: func() { write("garbage") }, message: "Secret keys key key line 1 is not an SSH public key", writes: 2},
		{name: "garbage again: still reported, still nothing written", connected: true, message: "is not an SSH public key", writes: 2},
		{name: "the agent refuses: retried", connected: true, change: func() { write(testKey); a.err = errors.New("boom") }, message: "user [root]: boom", writes: 3},
		{name: "retry", connected: true, message: "boom", writes: 4},
		{name: "agent fine again", connected: true, change: func() { a.err = nil }, synced: true, writes: 5},
		{name: "agent gone", message: "Guest agent is offline", writes: 5},
		{name: "agent back: written again", connected: true, synced: true, writes: 6},
	}
	for _, s := range steps {
		if s.change != nil {
			s.change()
		}
		st := c.sync(ctx, a, s.connected)
		if st == nil || st.Synchronized != s.synced || !strings.Contains(st.Message, s.message) || a.writes != s.writes {
			t.Fatalf("%s: status %+v, writes %d; want synchronized %v, message %q, writes %d", s.name, st, a.writes, s.synced, s.message, s.writes)
		}
	}
}
