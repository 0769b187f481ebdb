package upload

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

func testKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func TestToken(t *testing.T) {
	pub, priv := testKey(t)
	otherPub, otherPriv := testKey(t)
	now := time.Unix(1_800_000_000, 0)
	good := Claims{Operation: Operation, Namespace: "ns", PVC: "disk", IssuedAt: now.Unix(), Expires: now.Add(5 * time.Minute).Unix()}
	token := Sign(priv, good)
	c, err := Verify(pub, token, now.Add(time.Minute))
	if err != nil || c != good {
		t.Fatalf("Verify = %+v, %v; want %+v", c, err, good)
	}
	parts := strings.Split(token, ".")
	forged := good
	forged.PVC = "other"
	for name, tc := range map[string]struct {
		token string
		pub   ed25519.PublicKey
		at    time.Time
		want  string
	}{
		"expired":               {token, pub, now.Add(5 * time.Minute), "expired at"},
		"other key":             {token, otherPub, now, "bad signature"},
		"signed by another key": {Sign(otherPriv, good), pub, now, "bad signature"},
		"claims swapped":        {parts[0] + "." + b64(mustJSON(forged)) + "." + parts[2], pub, now, "bad signature"},
		"not a jwt":             {"abc", pub, now, "not an EdDSA JWT"},
		"empty":                 {"", pub, now, "not an EdDSA JWT"},
		"other operation":       {Sign(priv, Claims{Operation: "Clone", Expires: now.Add(time.Hour).Unix()}), pub, now, `operation "Clone"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Verify(tc.pub, tc.token, tc.at)
			if !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadToken with %q", err, tc.want)
			}
		})
	}
	if got := BearerToken("bearer  abc "); got != "abc" {
		t.Errorf("BearerToken = %q", got)
	}
	if got := BearerToken("Basic abc"); got != "" {
		t.Errorf("BearerToken(Basic) = %q", got)
	}
}
