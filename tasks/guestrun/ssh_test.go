package guestrun

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

func TestParseSSHSecret(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(block)
	signer, _ := ssh.NewSignerFromKey(priv)
	hostKey := ssh.MarshalAuthorizedKey(signer.PublicKey())
	for name, tc := range map[string]struct {
		data    map[string][]byte
		wantErr string
		check   func(*SSHConfig) bool
	}{
		"ssh-auth secret, insecure": {data: map[string][]byte{"ssh-privatekey": key, "disable-strict-host-key-checking": []byte("true")},
			check: func(c *SSHConfig) bool { return c.User == "root" && c.Insecure && c.HostKey == nil }},
		"upstream key name, host key": {data: map[string][]byte{"private-key": key, "user": []byte("fedora\n"), "host-public-key": hostKey},
			check: func(c *SSHConfig) bool { return c.User == "fedora" && c.HostKey != nil && !c.Insecure }},
		"no key":        {data: map[string][]byte{"user": []byte("root")}, wantErr: "no private key"},
		"bad key":       {data: map[string][]byte{"private-key": []byte("junk"), "disable-strict-host-key-checking": []byte("true")}, wantErr: "private key"},
		"no host check": {data: map[string][]byte{"private-key": key}, wantErr: "neither host-public-key nor disable-strict-host-key-checking"},
		"bad bool":      {data: map[string][]byte{"private-key": key, "disable-strict-host-key-checking": []byte("sure")}, wantErr: `"sure" is not true or false`},
		"bad host key":  {data: map[string][]byte{"private-key": key, "host-public-key": []byte("nope")}, wantErr: "host-public-key"},
	} {
		cfg, err := ParseSSHSecret("ns/s", tc.data)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "ns/s") {
				t.Errorf("%s: err = %v, want %q naming the secret", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(cfg) {
			t.Errorf("%s: %+v, %v", name, cfg, err)
		}
	}
}

func TestShellCommand(t *testing.T) {
	if got := shellCommand(guestexec.Request{Command: "/bin/sh", Args: []string{"-c", "echo $HOME; exit 2"}}); got != "echo $HOME; exit 2" {
		t.Errorf("script = %q", got)
	}
	if got := shellCommand(guestexec.Request{Command: "ls", Args: []string{"-la /tmp", "$HOME"}}); got != `ls -la /tmp $HOME` {
		t.Errorf("command = %q", got)
	}
}
