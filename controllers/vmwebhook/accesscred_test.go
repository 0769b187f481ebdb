package vmwebhook

import (
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestCheckAccessCredentials(t *testing.T) {
	secret := func(name string) *v1.AccessCredentialSecretSource {
		return &v1.AccessCredentialSecretSource{SecretName: name}
	}
	agent := func(users ...string) v1.SSHPublicKeyAccessCredentialPropagationMethod {
		return v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}
	}
	ssh := func(src *v1.AccessCredentialSecretSource, m v1.SSHPublicKeyAccessCredentialPropagationMethod) v1.AccessCredential {
		return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{Source: v1.SSHPublicKeyAccessCredentialSource{Secret: src}, PropagationMethod: m}}
	}
	password := func(src *v1.AccessCredentialSecretSource, agent bool) v1.AccessCredential {
		c := v1.AccessCredential{UserPassword: &v1.UserPasswordAccessCredential{Source: v1.UserPasswordAccessCredentialSource{Secret: src}}}
		if agent {
			c.UserPassword.PropagationMethod.QemuGuestAgent = &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}
		}
		return c
	}
	noCloud := v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}
	seed := v1.Volume{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config"}}}
	for name, tc := range map[string]struct {
		creds   []v1.AccessCredential
		volumes []v1.Volume
		want    []string // one message containing each; none if empty
	}{
		"virtctl create vm --access-cred=type:ssh,src:k,user:root": {creds: []v1.AccessCredential{ssh(secret("k"), agent("root"))}},
		"keys by noCloud with a seed, a password":                  {creds: []v1.AccessCredential{ssh(secret("k"), noCloud), password(secret("p"), true)}, volumes: []v1.Volume{seed}},
		"noCloud without a seed": {creds: []v1.AccessCredential{ssh(secret("k"), noCloud)},
			want: []string{"spec.accessCredentials[0].sshPublicKey.propagationMethod.noCloud requires a cloudInitNoCloud volume"}},
		"both types": {creds: []v1.AccessCredential{{SSHPublicKey: ssh(secret("k"), agent("root")).SSHPublicKey, UserPassword: password(secret("p"), true).UserPassword}},
			want: []string{"spec.accessCredentials[0] must have exactly one access credential type"}},
		"neither type": {creds: []v1.AccessCredential{{}}, want: []string{"spec.accessCredentials[0] must have exactly one"}},
		"no method":    {creds: []v1.AccessCredential{ssh(secret("k"), v1.SSHPublicKeyAccessCredentialPropagationMethod{})}, want: []string{"sshPublicKey.propagationMethod must have exactly one"}},
		"no users":     {creds: []v1.AccessCredential{ssh(secret("k"), agent())}, want: []string{"qemuGuestAgent.users requires at least one user"}},
		"a user that is a path": {creds: []v1.AccessCredential{ssh(secret("k"), agent("root", "../../etc"))},
			want: []string{`spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users[1]: "../../etc" is not a guest user name`}},
		"a Secret of another namespace": {creds: []v1.AccessCredential{ssh(secret("other/keys"), agent("root"))},
			want: []string{`spec.accessCredentials[0].sshPublicKey.source.secret.secretName "other/keys" is not a Secret name`}},
		"no source":                 {creds: []v1.AccessCredential{password(nil, true)}, want: []string{"userPassword.source must have exactly one source"}},
		"a password with no method": {creds: []v1.AccessCredential{password(secret("p"), false)}, want: []string{"userPassword.propagationMethod must have exactly one"}},
	} {
		spec := &v1.VirtualMachineInstanceSpec{AccessCredentials: tc.creds, Volumes: tc.volumes}
		msgs := checkAccessCredentials("spec", spec)
		if len(msgs) != len(tc.want) {
			t.Errorf("%s: %q, want %d messages %q", name, msgs, len(tc.want), tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(msgs[i], w) {
				t.Errorf("%s: %q, want %q", name, msgs[i], w)
			}
		}
	}
}
