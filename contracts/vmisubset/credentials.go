package vmisubset

import (
	"fmt"
	"regexp"

	v1 "kubevirt.io/api/core/v1"
)

// CredentialSecret is the Secret an access credential reads ("" if it
// names none; Secrets are the only source tekvirt admits).
func CredentialSecret(c v1.AccessCredential) string {
	switch {
	case c.SSHPublicKey != nil && c.SSHPublicKey.Source.Secret != nil:
		return c.SSHPublicKey.Source.Secret.SecretName
	case c.UserPassword != nil && c.UserPassword.Source.Secret != nil:
		return c.UserPassword.Source.Secret.SecretName
	}
	return ""
}

// guestUser is a POSIX user name as useradd takes it: no slash, no dot to
// begin with, at most 32 characters.
var guestUser = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

// GuestUser checks a guest user name that accessCredentials give the guest
// agent (a qemuGuestAgent user, a userPassword Secret's key). The agent
// writes into that user's home directory, so the name must be a user
// name and nothing that reads as a path.
func GuestUser(name string) error {
	if !guestUser.MatchString(name) {
		return fmt.Errorf("%q is not a guest user name (a letter or _ first, then letters, digits, _, . or -, at most 32)", name)
	}
	return nil
}
