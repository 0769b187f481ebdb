package images

import (
	"crypto/md5"  //nolint:gosec // CDI checksums may name md5; it is verified, not trusted for security
	"crypto/sha1" //nolint:gosec // as above
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// Checksum is an expected digest in CDI's "alg:hex" form.
type Checksum struct {
	Alg  string
	want []byte
	h    hash.Hash
}

// ParseChecksum reads "md5:...", "sha1:...", "sha256:..." or "sha512:...";
// empty text gives nil (nothing to verify).
func ParseChecksum(text string) (*Checksum, error) {
	if text == "" {
		return nil, nil
	}
	alg, hexDigest, ok := strings.Cut(text, ":")
	if !ok {
		return nil, fmt.Errorf("checksum %q is not alg:hex", text)
	}
	newHash := map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}[strings.ToLower(alg)]
	if newHash == nil {
		return nil, fmt.Errorf("checksum algorithm %q is not one of md5, sha1, sha256, sha512", alg)
	}
	want, err := hex.DecodeString(hexDigest)
	h := newHash()
	if err != nil || len(want) != h.Size() {
		return nil, fmt.Errorf("checksum %q: want %d hex bytes of %s", text, h.Size(), alg)
	}
	return &Checksum{Alg: strings.ToLower(alg), want: want, h: h}, nil
}

// Write feeds the hash.
func (c *Checksum) Write(p []byte) (int, error) { return c.h.Write(p) }

// Verify compares what was written with the expected digest.
func (c *Checksum) Verify() error {
	got := c.h.Sum(nil)
	if !strings.EqualFold(hex.EncodeToString(got), hex.EncodeToString(c.want)) {
		return fmt.Errorf("%w: %s of the image is %x, want %x", ErrChecksum, c.Alg, got, c.want)
	}
	return nil
}
