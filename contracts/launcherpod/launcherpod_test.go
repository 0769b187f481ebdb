package launcherpod

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestEmptyDirOnNode(t *testing.T) {
	for _, tc := range []struct {
		uid  types.UID
		want string
		bad  bool
	}{
		{uid: "0175330a-bf40-4d80-a4f6-4da207bbe4af", want: "/var/lib/kubelet/pods/0175330a-bf40-4d80-a4f6-4da207bbe4af/volumes/kubernetes.io~empty-dir/vm"},
		{uid: "../../../etc", bad: true},
		{uid: "", bad: true},
		{uid: "0175330a-bf40-4d80-a4f6-4da207bbe4af/../x", bad: true},
	} {
		got, err := EmptyDirOnNode("/var/lib/kubelet", tc.uid, VMVolume)
		if tc.bad {
			if err == nil {
				t.Errorf("uid %q: got %s, want an error", tc.uid, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("uid %q: got %q, %v; want %q", tc.uid, got, err, tc.want)
		}
	}
}

func TestSecretOnNode(t *testing.T) {
	got, err := SecretOnNode("/var/lib/kubelet", "0175330a-bf40-4d80-a4f6-4da207bbe4af", AccessCredentialVolume(2))
	if want := "/var/lib/kubelet/pods/0175330a-bf40-4d80-a4f6-4da207bbe4af/volumes/kubernetes.io~secret/access-credential-2"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := SecretOnNode("/var/lib/kubelet", "../x", "v"); err == nil {
		t.Error("a UID that is a path was accepted")
	}
	if p := AccessCredentialPath(3); p != AccessCredentialsDir+"/3" {
		t.Errorf("AccessCredentialPath(3) = %s", p)
	}
}
