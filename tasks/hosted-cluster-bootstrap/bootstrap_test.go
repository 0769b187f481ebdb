package hostedclusterbootstrap

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsureTokenKeepsAHeldTokenAndReplacesAGoneOne(t *testing.T) {
	ctx := context.Background()
	hosted := fake.NewClientset()
	token, made, err := EnsureToken(ctx, hosted, "")
	if err != nil || !made {
		t.Fatalf("first token: %q made=%v err=%v", token, made, err)
	}
	id, secret, ok := strings.Cut(token, ".")
	if !ok || len(id) != 6 || len(secret) != 16 {
		t.Fatalf("token %q is not <6>.<16>", token)
	}
	s, err := hosted.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeBootstrapToken || string(s.Data["token-secret"]) != secret ||
		string(s.Data["usage-bootstrap-authentication"]) != "true" || string(s.Data["auth-extra-groups"]) != WorkerGroup {
		t.Fatalf("hosted token Secret: %v %v", s.Type, s.Data)
	}
	if _, ok := s.Data["expiration"]; ok {
		t.Fatal("the pool's token must not expire")
	}

	again, made, err := EnsureToken(ctx, hosted, token)
	if err != nil || made || again != token {
		t.Fatalf("held token: got %q made=%v err=%v, want %q kept", again, made, err, token)
	}
	// A token whose secret differs (a tampered Secret) is replaced.
	other, made, err := EnsureToken(ctx, hosted, id+".0000000000000000")
	if err != nil || !made || other == token {
		t.Fatalf("mismatched token: got %q made=%v err=%v", other, made, err)
	}
	if err := hosted.CoreV1().Secrets("kube-system").Delete(ctx, "bootstrap-token-"+id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh, made, err := EnsureToken(ctx, hosted, token)
	if err != nil || !made || fresh == token {
		t.Fatalf("deleted token: got %q made=%v err=%v", fresh, made, err)
	}
}

func TestEnsureBindingsRepairs(t *testing.T) {
	ctx := context.Background()
	// One binding exists with a wrong roleRef, another with a wrong subject.
	hosted := fake.NewClientset(
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-bootstrap"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:authenticated"}}},
	)
	for range 2 {
		if err := EnsureBindings(ctx, hosted); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range Bindings {
		got, err := hosted.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.RoleRef.Name != want.Role || len(got.Subjects) != 1 || got.Subjects[0].Name != want.Group || got.Subjects[0].Kind != rbacv1.GroupKind {
			t.Errorf("%s: roleRef %s subjects %v, want %s bound to group %s", name, got.RoleRef.Name, got.Subjects, want.Role, want.Group)
		}
	}
}

func TestUserData(t *testing.T) {
	ud := UserData("https://10.96.0.10:6443", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "abcdef.0123456789abcdef", nil)
	for _, want := range []string{
		"#!/bin/sh\n",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nEND\n",
		`server: "https://10.96.0.10:6443"`,
		`token: "abcdef.0123456789abcdef"`,
		"> /etc/kubernetes/bootstrap-kubelet.conf",
	} {
		if !strings.Contains(ud, want) {
			t.Errorf("user-data lacks %q:\n%s", want, ud)
		}
	}
	if strings.Contains(ud, "config.json") {
		t.Error("user-data without a pull secret writes one")
	}
	pull := `{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}`
	ud = UserData("https://10.96.0.10:6443", nil, "abcdef.0123456789abcdef", []byte(pull+"\n"))
	if !strings.Contains(ud, "cat > /var/lib/kubelet/config.json <<'END'\n"+pull+"\nEND\n") {
		t.Errorf("user-data does not write the pull secret where kubelet reads it:\n%s", ud)
	}
}
