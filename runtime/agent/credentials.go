package agent

import (
	"context"
	"encoding/base64"
)

// SetAuthorizedKeys makes keys the whole of user's ~/.ssh/authorized_keys
// (guest-ssh-add-authorized-keys with reset): the agent looks the user up
// in the guest and creates the directory and file with the user's
// ownership and modes.
func (c *Client) SetAuthorizedKeys(ctx context.Context, user string, keys []string) error {
	if keys == nil {
		keys = []string{}
	}
	return c.call(ctx, "guest-ssh-add-authorized-keys", map[string]any{"username": user, "keys": keys, "reset": true}, nil)
}

// AuthorizedKeys reads user's ~/.ssh/authorized_keys
// (guest-ssh-get-authorized-keys).
func (c *Client) AuthorizedKeys(ctx context.Context, user string) ([]string, error) {
	var out struct {
		Keys []string `json:"keys"`
	}
	err := c.call(ctx, "guest-ssh-get-authorized-keys", map[string]any{"username": user}, &out)
	return out.Keys, err
}

// SetUserPassword sets user's password to the clear-text password
// (guest-set-user-password; the guest hashes it).
func (c *Client) SetUserPassword(ctx context.Context, user, password string) error {
	return c.call(ctx, "guest-set-user-password", map[string]any{
		"username": user, "password": base64.StdEncoding.EncodeToString([]byte(password)), "crypted": false}, nil)
}
