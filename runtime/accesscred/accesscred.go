package accesscred

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"sort"
	"strings"

	"golang.org/x/crypto/ssh"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// maxFileBytes bounds one file of a Secret (the API server's own limit for
// a whole Secret is 1 MiB).
const maxFileBytes = 1 << 20

// Set is what a VMI's accessCredentials give, read from their Secrets.
type Set struct {
	// Keys are, per guest user, the authorized keys of its qemuGuestAgent
	// credentials, in the credentials' order.
	Keys map[string][]string
	// Passwords are, per guest user, the passwords of userPassword
	// credentials.
	Passwords map[string]string
	// CloudInit are the keys of noCloud credentials, for the seed.
	CloudInit []string
	// Problems say what was left out and why, naming the Secret.
	Problems []string
	// Digest changes whenever what was read does.
	Digest string
}

// NeedsAgent reports whether any credential goes through the guest agent.
func NeedsAgent(creds []v1.AccessCredential) bool {
	for _, c := range creds {
		if c.UserPassword != nil || c.SSHPublicKey != nil && c.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil {
			return true
		}
	}
	return false
}

// Read reads every credential's Secret; secret(i) opens the Secret of
// creds[i].
func Read(creds []v1.AccessCredential, secret func(i int) (fs.FS, error)) Set {
	r := reader{s: Set{Keys: map[string][]string{}, Passwords: map[string]string{}}, h: sha256.New(), spoiled: map[string]bool{}}
	for i, c := range creds {
		r.add(i, c, secret)
	}
	for u := range r.spoiled {
		delete(r.s.Keys, u)
	}
	r.s.Digest = hex.EncodeToString(r.h.Sum(nil))
	return r.s
}

type reader struct {
	s Set
	h hash.Hash
	// spoiled are the users with a bad key somewhere: none of their keys
	// are written.
	spoiled map[string]bool
}

func (r *reader) add(i int, c v1.AccessCredential, secret func(i int) (fs.FS, error)) {
	name := vmisubset.CredentialSecret(c)
	var users []string
	if c.SSHPublicKey != nil && c.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil {
		users = c.SSHPublicKey.PropagationMethod.QemuGuestAgent.Users
	}
	files, err := readSecret(secret, i)
	if err != nil {
		r.s.Problems = append(r.s.Problems, fmt.Sprintf("Secret %s: %v", name, err))
		for _, u := range users {
			r.spoiled[u] = true
		}
		return
	}
	for _, f := range files {
		fmt.Fprintf(r.h, "%d\x00%s\x00%d\x00%s\x00", i, f.name, len(f.data), f.data)
	}
	switch {
	case c.SSHPublicKey != nil:
		keys, problems := parseKeys(name, files)
		r.s.Problems = append(r.s.Problems, problems...)
		if c.SSHPublicKey.PropagationMethod.QemuGuestAgent == nil {
			if len(problems) == 0 {
				r.s.CloudInit = append(r.s.CloudInit, keys...)
			}
			return
		}
		for _, u := range users {
			if err := vmisubset.GuestUser(u); err != nil {
				r.s.Problems = append(r.s.Problems, fmt.Sprintf("Secret %s: user %v", name, err))
				continue
			}
			if len(problems) > 0 {
				r.spoiled[u] = true
			}
			r.s.Keys[u] = append(r.s.Keys[u], keys...)
		}
	case c.UserPassword != nil:
		r.addPasswords(name, files)
	}
}

// addPasswords takes a password Secret: one key per user.
func (r *reader) addPasswords(secret string, files []file) {
	for _, f := range files {
		if err := vmisubset.GuestUser(f.name); err != nil {
			r.s.Problems = append(r.s.Problems, fmt.Sprintf("Secret %s: key %v", secret, err))
			continue
		}
		if pw := strings.TrimSpace(string(f.data)); pw != "" {
			r.s.Passwords[f.name] = pw
		}
	}
}

type file struct {
	name string
	data []byte
}

// readSecret lists a Secret volume's keys (not the kubelet's ..data
// entries) and their content, in name order.
func readSecret(secret func(i int) (fs.FS, error), i int) ([]file, error) {
	fsys, err := secret(i)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []file
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || e.IsDir() {
			continue
		}
		f, err := fsys.Open(e.Name())
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err == nil && (!st.Mode().IsRegular() || st.Size() > maxFileBytes) {
			err = fmt.Errorf("key %s is not a regular file of at most %d bytes", e.Name(), maxFileBytes)
		}
		var data []byte
		if err == nil {
			data = make([]byte, st.Size())
			_, err = io.ReadFull(f, data)
		}
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, file{name: e.Name(), data: data})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out, nil
}

// parseKeys returns the authorized keys lines of a Secret's files, and a
// problem for every line that is not one.
func parseKeys(secret string, files []file) (keys, problems []string) {
	for _, f := range files {
		for n, line := range strings.Split(string(f.data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
				problems = append(problems, fmt.Sprintf("Secret %s key %s line %d is not an SSH public key: %v", secret, f.name, n+1, err))
				continue
			}
			keys = append(keys, line)
		}
	}
	return keys, problems
}

// Agent is the part of the guest agent Apply uses.
type Agent interface {
	SetAuthorizedKeys(ctx context.Context, user string, keys []string) error
	SetUserPassword(ctx context.Context, user, password string) error
}

// Apply writes s's keys and passwords through a, user by user, and
// returns what failed (nil when everything, Problems included, is fine).
func Apply(ctx context.Context, a Agent, s Set) []string {
	failed := append([]string(nil), s.Problems...)
	for _, u := range sortedKeys(s.Keys) {
		if err := a.SetAuthorizedKeys(ctx, u, s.Keys[u]); err != nil {
			failed = append(failed, fmt.Sprintf("Error encountered writing ssh pub key access credentials for user [%s]: %v", u, err))
		}
	}
	for _, u := range sortedKeys(s.Passwords) {
		if err := a.SetUserPassword(ctx, u, s.Passwords[u]); err != nil {
			failed = append(failed, fmt.Sprintf("Error encountered setting password for user [%s]: %v", u, err))
		}
	}
	return failed
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
