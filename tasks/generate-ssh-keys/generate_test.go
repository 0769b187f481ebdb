package generatesshkeys

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseKeygenOptions(t *testing.T) {
	tests := []struct {
		in      string
		want    KeySpec
		wantErr string
	}{
		{in: "", want: KeySpec{Type: "ed25519"}},
		{in: "-t rsa", want: KeySpec{Type: "rsa", Bits: 3072}},
		{in: "-t rsa -b 2048 -C 'me at host'", want: KeySpec{Type: "rsa", Bits: 2048, Comment: "me at host"}},
		{in: "-t ecdsa -b 384", want: KeySpec{Type: "ecdsa", Bits: 384}},
		{in: "-t dsa", wantErr: `unsupported key type -t "dsa"`},
		{in: "-q -t rsa-sha2-512 -N '' -a 100 -Z aes256-ctr", want: KeySpec{Type: "rsa", Bits: 3072}},
		{in: "-t rsa-sha2-256 -m pem", want: KeySpec{Type: "rsa", Bits: 3072, Format: "PEM"}},
		{in: "-m PKCS8", want: KeySpec{Type: "ed25519", Format: "PKCS8"}},
		{in: "-f /tmp/key", wantErr: `ssh-keygen option "-f" is not supported`},
		{in: "-N secret", wantErr: "-N with a passphrase is not supported"},
		{in: "-m RFC4716", wantErr: "public key export format"},
		{in: "-m PEM", wantErr: "no ed25519 form"},
		{in: "-b", wantErr: "option -b needs a value"},
		{in: "-t rsa -b 1024", wantErr: "out of range"},
		{in: "-t ed25519 -b 4096", wantErr: "fixed size"},
		{in: "-C 'open", wantErr: "unterminated quote"},
	}
	for _, tt := range tests {
		got, err := ParseKeygenOptions(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseKeygenOptions(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseKeygenOptions(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestGenerateKeysParse(t *testing.T) {
	for _, spec := range []KeySpec{{Type: "ed25519", Comment: "c"}, {Type: "rsa", Bits: 2048}, {Type: "ecdsa", Bits: 256},
		{Type: "rsa", Bits: 2048, Format: "PEM"}, {Type: "ecdsa", Bits: 384, Format: "PEM"}, {Type: "ed25519", Format: "PKCS8"}} {
		kp, err := Generate(spec)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := ssh.ParsePrivateKey(kp.PrivateKeyPEM)
		if err != nil {
			t.Fatalf("%s: private key does not parse: %v", spec.Type, err)
		}
		pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(kp.AuthorizedKey))
		if err != nil {
			t.Fatalf("%s: authorized key does not parse: %v", spec.Type, err)
		}
		if string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
			t.Fatalf("%s: public key does not match private key", spec.Type)
		}
		if comment != spec.Comment {
			t.Fatalf("%s: comment = %q, want %q", spec.Type, comment, spec.Comment)
		}
	}
}

func TestParseConnectionOptions(t *testing.T) {
	got, err := ParseConnectionOptions([]string{"user:root", "additional-ssh-options:-p 8022", ""})
	if err != nil || string(got["user"]) != "root" || string(got["additional-ssh-options"]) != "-p 8022" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"nocolon", "color:blue", ":x"} {
		if _, err := ParseConnectionOptions([]string{bad}); err == nil {
			t.Errorf("option %q accepted", bad)
		}
	}
}

// withGenerateName makes the fake clientset name generateName objects as the
// API server does.
func withGenerateName(cs *fake.Clientset) {
	n := 0
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret)
		if s.Name == "" && s.GenerateName != "" {
			n++
			s.Name = s.GenerateName + strings.Repeat("x", n)
		}
		return false, nil, nil
	})
}

func TestRunAppendsToExistingPublicSecret(t *testing.T) {
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "authorized"},
		Data:       map[string][]byte{"key-old": []byte("ssh-ed25519 AAAA old")},
	}
	cs := fake.NewClientset(existing)
	withGenerateName(cs)
	res, err := Run(context.Background(), cs, Params{
		PublicKeySecretName: "authorized", DefaultNamespace: "ns",
		PrivateKeyConnectionOptions: []string{"user:root"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.PublicKeySecretName != "authorized" || res.PublicKeySecretNamespace != "ns" || res.PrivateKeySecretNamespace != "ns" ||
		!strings.HasPrefix(res.PrivateKeySecretName, "private-key-") {
		t.Fatalf("results = %+v", res)
	}
	pub, _ := cs.CoreV1().Secrets("ns").Get(context.Background(), "authorized", metav1.GetOptions{})
	if len(pub.Data) != 2 || string(pub.Data["key-old"]) != "ssh-ed25519 AAAA old" {
		t.Fatalf("public secret data = %v, want the old key plus one new", pub.Data)
	}
	priv, _ := cs.CoreV1().Secrets("ns").Get(context.Background(), res.PrivateKeySecretName, metav1.GetOptions{})
	if priv.Type != corev1.SecretTypeSSHAuth || string(priv.Data["user"]) != "root" {
		t.Fatalf("private secret = %+v", priv)
	}
	if _, err := ssh.ParsePrivateKey(priv.Data[corev1.SSHAuthPrivateKey]); err != nil {
		t.Fatal(err)
	}
}

func TestRunRefusesExistingPrivateSecret(t *testing.T) {
	keep := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"},
		Data:       map[string][]byte{"ssh-privatekey": []byte("precious")},
	}
	cs := fake.NewClientset(keep)
	withGenerateName(cs)
	_, err := Run(context.Background(), cs, Params{PrivateKeySecretName: "mine", DefaultNamespace: "ns"})
	if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "ns/mine") {
		t.Fatalf("err = %v, want an error naming ns/mine", err)
	}
	got, _ := cs.CoreV1().Secrets("ns").Get(context.Background(), "mine", metav1.GetOptions{})
	if string(got.Data["ssh-privatekey"]) != "precious" {
		t.Fatal("existing private key secret was changed")
	}
	list, _ := cs.CoreV1().Secrets("ns").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("secrets after refusal = %d, want 1 (nothing created)", len(list.Items))
	}
}

func TestRunRollsBackPrivateKeyWhenPublicFails(t *testing.T) {
	cs := fake.NewClientset()
	withGenerateName(cs)
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).GenerateName == "public-key-" {
			return true, nil, errors.New("quota exceeded")
		}
		return false, nil, nil
	})
	_, err := Run(context.Background(), cs, Params{DefaultNamespace: "ns"})
	if err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("err = %v", err)
	}
	list, _ := cs.CoreV1().Secrets("ns").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Fatalf("secrets left after failure: %d", len(list.Items))
	}
}
