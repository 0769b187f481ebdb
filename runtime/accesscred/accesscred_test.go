package accesscred

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	v1 "kubevirt.io/api/core/v1"
)

const (
	keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF1hdQN35rm7+cqDLwRsj6LKShfxDw9T3X34jRB3TOMb a"
	keyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF1hdQN35rm7+cqDLwRsj6LKShfxDw9T3X34jRB3TOMb b"
)

func secretRef(name string) *v1.AccessCredentialSecretSource {
	return &v1.AccessCredentialSecretSource{SecretName: name}
}

func agentKeys(secret string, users ...string) v1.AccessCredential {
	return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
		Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: secretRef(secret)},
		PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}}}
}

func noCloudKeys(secret string) v1.AccessCredential {
	return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
		Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: secretRef(secret)},
		PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}}}
}

func passwords(secret string) v1.AccessCredential {
	return v1.AccessCredential{UserPassword: &v1.UserPasswordAccessCredential{
		Source:            v1.UserPasswordAccessCredentialSource{Secret: secretRef(secret)},
		PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}}}}
}

// volume is a Secret as the kubelet mounts it: keys linked through ..data.
func volume(data map[string]string) fstest.MapFS {
	m := fstest.MapFS{"..data": &fstest.MapFile{Mode: fs.ModeDir | 0o755}, "..2026_12_02_20_00_00.1": &fstest.MapFile{Mode: fs.ModeDir | 0o755}}
	for k, v := range data {
		m[k] = &fstest.MapFile{Data: []byte(v), Mode: 0o644}
	}
	return m
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		creds     []v1.AccessCredential
		secrets   []fstest.MapFS
		keys      map[string][]string
		passwords map[string]string
		cloudInit []string
		problems  []string
	}{{
		name:    "keys of two Secrets for one user, in order, comments and blank lines left out",
		creds:   []v1.AccessCredential{agentKeys("a", "root", "cloud-user"), agentKeys("b", "root")},
		secrets: []fstest.MapFS{volume(map[string]string{"key": "# mine\n" + keyA + "\n\n"}), volume(map[string]string{"k1": keyB, "k0": keyA})},
		keys:    map[string][]string{"root": {keyA, keyA, keyB}, "cloud-user": {keyA}},
	}, {
		name:      "noCloud keys go to the seed, passwords per user",
		creds:     []v1.AccessCredential{noCloudKeys("n"), passwords("p")},
		secrets:   []fstest.MapFS{volume(map[string]string{"key": keyB}), volume(map[string]string{"root": "s3cret\n", "guest": "pw", "empty": " "})},
		cloudInit: []string{keyB},
		passwords: map[string]string{"root": "s3cret", "guest": "pw"},
	}, {
		name:     "a line that is no key leaves every user it was for untouched",
		creds:    []v1.AccessCredential{agentKeys("good", "root", "guest"), agentKeys("bad", "root")},
		secrets:  []fstest.MapFS{volume(map[string]string{"key": keyA}), volume(map[string]string{"key": keyB + "\nnot a key at all"})},
		keys:     map[string][]string{"guest": {keyA}},
		problems: []string{"Secret bad key key line 2 is not an SSH public key"},
	}, {
		name:     "garbage in a noCloud Secret: none of its keys reach the seed",
		creds:    []v1.AccessCredential{noCloudKeys("n")},
		secrets:  []fstest.MapFS{volume(map[string]string{"key": keyA + "\n-----BEGIN OPENSSH PRIVATE KEY-----"})},
		problems: []string{"Secret n key key line 2 is not an SSH public key"},
	}, {
		name:      "user names that read as paths",
		creds:     []v1.AccessCredential{agentKeys("a", "../../etc", "root"), passwords("p")},
		secrets:   []fstest.MapFS{volume(map[string]string{"key": keyA}), volume(map[string]string{".profile": "x", "root": "pw"})},
		keys:      map[string][]string{"root": {keyA}},
		passwords: map[string]string{"root": "pw"},
		problems:  []string{`Secret a: user "../../etc" is not a guest user name`, `Secret p: key ".profile" is not a guest user name`},
	}, {
		name:     "a Secret that cannot be read",
		creds:    []v1.AccessCredential{agentKeys("gone", "root")},
		secrets:  []fstest.MapFS{nil},
		keys:     map[string][]string{},
		problems: []string{"Secret gone: not mounted"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Read(tc.creds, func(i int) (fs.FS, error) {
				if tc.secrets[i] == nil {
					return nil, errors.New("not mounted")
				}
				return tc.secrets[i], nil
			})
			if tc.keys == nil {
				tc.keys = map[string][]string{}
			}
			if tc.passwords == nil {
				tc.passwords = map[string]string{}
			}
			if !reflect.DeepEqual(s.Keys, tc.keys) || !reflect.DeepEqual(s.Passwords, tc.passwords) || !reflect.DeepEqual(s.CloudInit, tc.cloudInit) {
				t.Errorf("keys %v passwords %v cloud-init %v;\nwant %v %v %v", s.Keys, s.Passwords, s.CloudInit, tc.keys, tc.passwords, tc.cloudInit)
			}
			if len(s.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %q", s.Problems, tc.problems)
			}
			for i, p := range tc.problems {
				if !strings.HasPrefix(s.Problems[i], p) {
					t.Errorf("problem %q, want it to begin %q", s.Problems[i], p)
				}
			}
		})
	}
}

func TestDigestFollowsContent(t *testing.T) {
	creds := []v1.AccessCredential{agentKeys("a", "root")}
	read := func(data string) string {
		return Read(creds, func(int) (fs.FS, error) { return volume(map[string]string{"key": data}), nil }).Digest
	}
	if a, again := read(keyA), read(keyA); a != again || a == read(keyB) {
		t.Error("the digest does not follow the Secret's content")
	}
}

type recorder struct {
	calls []string
	fail  string
}

func (r *recorder) SetAuthorizedKeys(_ context.Context, user string, keys []string) error {
	r.calls = append(r.calls, fmt.Sprintf("keys %s %d", user, len(keys)))
	if user == r.fail {
		return errors.New("no such user")
	}
	return nil
}

func (r *recorder) SetUserPassword(_ context.Context, user, _ string) error {
	r.calls = append(r.calls, "password "+user)
	return nil
}

func TestApply(t *testing.T) {
	r := &recorder{fail: "ghost"}
	failed := Apply(context.Background(), r, Set{
		Keys:      map[string][]string{"root": {keyA}, "ghost": {keyA, keyB}},
		Passwords: map[string]string{"root": "pw"},
		Problems:  []string{"Secret bad: ..."},
	})
	if want := []string{"keys ghost 2", "keys root 1", "password root"}; !reflect.DeepEqual(r.calls, want) {
		t.Errorf("calls %v, want %v", r.calls, want)
	}
	if len(failed) != 2 || failed[0] != "Secret bad: ..." || !strings.Contains(failed[1], "user [ghost]: no such user") {
		t.Errorf("failed %q", failed)
	}
	if got := Apply(context.Background(), &recorder{}, Set{}); got != nil {
		t.Errorf("nothing to do failed: %q", got)
	}
}

func TestNeedsAgent(t *testing.T) {
	if NeedsAgent([]v1.AccessCredential{noCloudKeys("n")}) || !NeedsAgent([]v1.AccessCredential{noCloudKeys("n"), passwords("p")}) ||
		!NeedsAgent([]v1.AccessCredential{agentKeys("a", "root")}) {
		t.Error("NeedsAgent")
	}
}
