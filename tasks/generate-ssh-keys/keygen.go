package generatesshkeys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// KeySpec is what additionalSSHKeygenOptions selects.
type KeySpec struct {
	Type    string // ed25519, rsa or ecdsa
	Bits    int    // 0 picks the type's default
	Comment string
}

// ParseKeygenOptions reads the ssh-keygen options the task supports:
// -t TYPE, -b BITS and -C COMMENT. Any other option is an error naming it.
func ParseKeygenOptions(opts string) (KeySpec, error) {
	spec := KeySpec{Type: "ed25519"}
	words, err := splitWords(opts)
	if err != nil {
		return spec, fmt.Errorf("additionalSSHKeygenOptions: %w", err)
	}
	for i := 0; i < len(words); i++ {
		opt := words[i]
		if opt != "-t" && opt != "-b" && opt != "-C" {
			return spec, fmt.Errorf("additionalSSHKeygenOptions: unsupported ssh-keygen option %q (supported: -t, -b, -C)", opt)
		}
		if i+1 >= len(words) {
			return spec, fmt.Errorf("additionalSSHKeygenOptions: option %s needs a value", opt)
		}
		i++
		switch opt {
		case "-t":
			spec.Type = words[i]
		case "-b":
			if spec.Bits, err = strconv.Atoi(words[i]); err != nil {
				return spec, fmt.Errorf("additionalSSHKeygenOptions: -b %q is not a number", words[i])
			}
		case "-C":
			spec.Comment = words[i]
		}
	}
	return spec, spec.validate()
}

func (s *KeySpec) validate() error {
	switch s.Type {
	case "ed25519":
		if s.Bits != 0 && s.Bits != 256 {
			return fmt.Errorf("additionalSSHKeygenOptions: ed25519 keys have a fixed size; -b %d is invalid", s.Bits)
		}
	case "rsa":
		if s.Bits == 0 {
			s.Bits = 3072
		}
		if s.Bits < 2048 || s.Bits > 16384 {
			return fmt.Errorf("additionalSSHKeygenOptions: rsa -b %d out of range 2048..16384", s.Bits)
		}
	case "ecdsa":
		if s.Bits == 0 {
			s.Bits = 256
		}
		if s.Bits != 256 && s.Bits != 384 && s.Bits != 521 {
			return fmt.Errorf("additionalSSHKeygenOptions: ecdsa -b %d must be 256, 384 or 521", s.Bits)
		}
	default:
		return fmt.Errorf("additionalSSHKeygenOptions: unsupported key type -t %q (ed25519, rsa, ecdsa)", s.Type)
	}
	return nil
}

// KeyPair is a generated key in the encodings the Secrets hold.
type KeyPair struct {
	// AuthorizedKey is the public key as one authorized_keys line.
	AuthorizedKey string
	// PrivateKeyPEM is the private key in OpenSSH format.
	PrivateKeyPEM []byte
}

// Generate makes a key pair as spec says.
func Generate(spec KeySpec) (KeyPair, error) {
	var priv crypto.Signer
	var err error
	switch spec.Type {
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, spec.Bits)
	case "ecdsa":
		curve := map[int]elliptic.Curve{256: elliptic.P256(), 384: elliptic.P384(), 521: elliptic.P521()}[spec.Bits]
		priv, err = ecdsa.GenerateKey(curve, rand.Reader)
	default:
		err = fmt.Errorf("unsupported key type %q", spec.Type)
	}
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating %s key: %w", spec.Type, err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return KeyPair{}, err
	}
	block, err := ssh.MarshalPrivateKey(priv, spec.Comment)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding private key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if spec.Comment != "" {
		line += " " + spec.Comment
	}
	return KeyPair{AuthorizedKey: line, PrivateKeyPEM: pem.EncodeToMemory(block)}, nil
}

// splitWords splits s at blanks, keeping single- or double-quoted text together.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
