package upload

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Claims is what an upload token grants: one upload into one PVC,
// until Expires. Tokens are JWTs signed with Ed25519 (alg EdDSA): the
// controller signs them for UploadTokenRequests, the upload proxy and the
// upload step verify them with the public key. UID is the PVC's, so that a
// token is no good for a PVC of the same name made later (a DataVolume
// deleted and created again).
type Claims struct {
	Operation string `json:"operation"`
	Namespace string `json:"namespace"`
	PVC       string `json:"pvc"`
	UID       string `json:"uid"`
	IssuedAt  int64  `json:"iat"`
	Expires   int64  `json:"exp"`
}

// For checks that the claims are for the PVC namespace/name with uid.
func (c Claims) For(namespace, name, uid string) error {
	if c.Namespace != namespace || c.PVC != name {
		return fmt.Errorf("%w: it is for PVC %s/%s", ErrBadToken, c.Namespace, c.PVC)
	}
	if c.UID == "" || c.UID != uid {
		return fmt.Errorf("%w: it is for an earlier PVC %s/%s (uid %q), not the one there now", ErrBadToken, c.Namespace, c.PVC, c.UID)
	}
	return nil
}

// Operation is the only operation tokens grant.
const Operation = "Upload"

// ErrBadToken is returned for tokens that are malformed, forged, expired or
// for another PVC.
var ErrBadToken = errors.New("invalid upload token")

var jwtHeader = b64(mustJSON(map[string]string{"alg": "EdDSA", "typ": "JWT"}))

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Sign returns a token for c.
func Sign(key ed25519.PrivateKey, c Claims) string {
	signed := jwtHeader + "." + b64(mustJSON(c))
	return signed + "." + b64(ed25519.Sign(key, []byte(signed)))
}

// Verify checks token's signature and expiry at now and
// returns its claims.
func Verify(pub ed25519.PublicKey, token string, now time.Time) (Claims, error) {
	var c Claims
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != jwtHeader {
		return c, fmt.Errorf("%w: not an EdDSA JWT", ErrBadToken)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return c, fmt.Errorf("%w: bad signature", ErrBadToken)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &c) != nil {
		return c, fmt.Errorf("%w: bad payload", ErrBadToken)
	}
	if c.Operation != Operation {
		return c, fmt.Errorf("%w: operation %q", ErrBadToken, c.Operation)
	}
	if now.Unix() >= c.Expires {
		return c, fmt.Errorf("%w: expired at %s", ErrBadToken, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	}
	return c, nil
}

// ParsePublicKey decodes a base64 (standard encoding) Ed25519 public key.
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("upload public key: want %d bytes of base64, got %q", ed25519.PublicKeySize, text)
	}
	return ed25519.PublicKey(b), nil
}

// BearerToken is the token of an "Authorization: Bearer" header value.
func BearerToken(header string) string {
	const prefix = "Bearer "
	if len(header) > len(prefix) && strings.EqualFold(header[:len(prefix)], prefix) {
		return strings.TrimSpace(header[len(prefix):])
	}
	return ""
}
