package registry

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImagesSurviveRestart pushes an image, starts a new handler over the same
// directory and pulls the image back by tag and by digest.
func TestImagesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	h1, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s1 := httptest.NewServer(h1)
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(strings.TrimPrefix(s1.URL, "http://") + "/test/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	want, _ := img.Digest()

	h2, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s2 := httptest.NewServer(h2)
	defer s2.Close()
	host := strings.TrimPrefix(s2.URL, "http://")
	for _, r := range []string{host + "/test/app:v1", host + "/test/app@" + want.String()} {
		ref, err := name.ParseReference(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("pulling %s after restart: %v", r, err)
		}
		d, _ := got.Digest()
		if d != want {
			t.Fatalf("digest after restart = %s, want %s", d, want)
		}
		if _, err := got.Layers(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrivateRepositories: an image under PrivatePrefix is pushed and
// pulled with the registry's credentials, and refused without them or
// with others; other repositories stay open.
func TestPrivateRepositories(t *testing.T) {
	dir := t.TempDir()
	h, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	user, pass, err := Credentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host + "/" + PrivatePrefix + "app:v1")
	if err := remote.Write(ref, img); err == nil {
		t.Fatal("pushed to a private repository without credentials")
	}
	good := remote.WithAuth(&authn.Basic{Username: user, Password: pass})
	if err := remote.Write(ref, img, good); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref, good); err != nil {
		t.Fatalf("pull with the credentials: %v", err)
	}
	for what, opts := range map[string][]remote.Option{
		"no credentials":   nil,
		"a wrong password": {remote.WithAuth(&authn.Basic{Username: user, Password: pass + "x"})},
	} {
		if _, err := remote.Image(ref, opts...); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
			t.Errorf("pull with %s: %v, want UNAUTHORIZED", what, err)
		}
	}
	open, _ := name.ParseReference(host + "/test/app:v1")
	if err := remote.Write(open, img); err != nil {
		t.Errorf("push to an open repository: %v", err)
	}
}
