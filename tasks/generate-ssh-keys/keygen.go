package generatesshkeys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/tekvirt/tekvirt/tasks/shellwords"
)

// KeySpec is what additionalSSHKeygenOptions selects.
type KeySpec struct {
	Type    string // ed25519, rsa or ecdsa
	Bits    int    // 0 picks the type's default
	Comment string
	// Format of the private key: "" (OpenSSH), PEM or PKCS8, as -m.
	Format string
}

// keygenFlags are the ssh-keygen options that take a value; valueless
// ones are in keygenSwitches. Both lists hold what makes sense when
// generating one key into a Secret; anything else (-f, -y, -p, -l, -R, a
// passphrase...) would make a secret the tasks cannot use, and is refused
// naming it.
var (
	keygenFlags    = map[string]bool{"-t": true, "-b": true, "-C": true, "-N": true, "-m": true, "-a": true, "-Z": true}
	keygenSwitches = map[string]bool{"-q": true}
)

// rsaTypes are the -t names of RSA keys: the signature algorithm names
// select the same RSA key.
var rsaTypes = map[string]bool{"rsa": true, "rsa-sha2-256": true, "rsa-sha2-512": true}

// ParseKeygenOptions reads ssh-keygen's options for generating a key: -t
// TYPE (ed25519, rsa, rsa-sha2-256, rsa-sha2-512, ecdsa), -b BITS, -C
// COMMENT, -m FORMAT (PEM, PKCS8), -N "" (no passphrase), and -q, -a and -Z
// which change nothing here. Any other option is an error naming it.
func ParseKeygenOptions(opts string) (KeySpec, error) {
	spec := KeySpec{Type: "ed25519"}
	words, err := shellwords.Split(opts)
	if err != nil {
		return spec, fmt.Errorf("additionalSSHKeygenOptions: %w", err)
	}
	for i := 0; i < len(words); i++ {
		opt := words[i]
		if keygenSwitches[opt] {
			continue
		}
		if !keygenFlags[opt] {
			return spec, fmt.Errorf("additionalSSHKeygenOptions: ssh-keygen option %q is not supported: it does not fit a key generated into a Secret (supported: -t, -b, -C, -m PEM|PKCS8, -N \"\", -q, -a, -Z)", opt)
		}
		if i+1 >= len(words) {
			return spec, fmt.Errorf("additionalSSHKeygenOptions: option %s needs a value", opt)
		}
		i++
		if err := spec.set(opt, words[i]); err != nil {
			return spec, fmt.Errorf("additionalSSHKeygenOptions: %w", err)
		}
	}
	return spec, spec.validate()
}

func (s *KeySpec) set(opt, value string) error {
	switch opt {
	case "-t":
		s.Type = value
		if rsaTypes[value] {
			s.Type = "rsa"
		}
	case "-b":
		bits, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("-b %q is not a number", value)
		}
		s.Bits = bits
	case "-C":
		s.Comment = value
	case "-N":
		if value != "" {
			return errors.New(`-N with a passphrase is not supported: the tasks that use the key cannot unlock it (use -N "")`)
		}
	case "-m":
		switch strings.ToUpper(value) {
		case "PEM", "PKCS8":
			s.Format = strings.ToUpper(value)
		case "RFC4716":
			return errors.New("-m RFC4716 is a public key export format; the private key Secret holds PEM, PKCS8 or OpenSSH")
		default:
			return fmt.Errorf("-m %q is not PEM, PKCS8 or RFC4716", value)
		}
	case "-a":
		if n, err := strconv.Atoi(value); err != nil || n < 1 {
			return fmt.Errorf("-a %q is not a positive number", value)
		}
	}
	return nil // -Z: the cipher of a passphrase, which there is not
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
		return fmt.Errorf("additionalSSHKeygenOptions: unsupported key type -t %q (ed25519, rsa, rsa-sha2-256, rsa-sha2-512, ecdsa)", s.Type)
	}
	if s.Format == "PEM" && s.Type == "ed25519" {
		return errors.New("additionalSSHKeygenOptions: -m PEM has no ed25519 form (use PKCS8 or the default OpenSSH format)")
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
	block, err := encodePrivateKey(priv, spec)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding private key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if spec.Comment != "" {
		line += " " + spec.Comment
	}
	return KeyPair{AuthorizedKey: line, PrivateKeyPEM: pem.EncodeToMemory(block)}, nil
}

// encodePrivateKey writes the key as -m asks: OpenSSH's format by
// default, PEM (PKCS#1 for RSA, SEC 1 for ECDSA) or PKCS#8.
func encodePrivateKey(priv crypto.Signer, spec KeySpec) (*pem.Block, error) {
	switch spec.Format {
	case "PKCS8":
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		return &pem.Block{Type: "PRIVATE KEY", Bytes: der}, err
	case "PEM":
		switch k := priv.(type) {
		case *rsa.PrivateKey:
			return &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}, nil
		case *ecdsa.PrivateKey:
			der, err := x509.MarshalECPrivateKey(k)
			return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}, err
		}
		return nil, fmt.Errorf("no PEM form for a %T", priv)
	}
	return ssh.MarshalPrivateKey(priv, spec.Comment)
}
