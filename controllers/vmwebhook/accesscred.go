package vmwebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// checkAccessCredentials lists what KubeVirt's admission refuses in a VMI
// spec's accessCredentials (at prefix) - not exactly one type, source or
// propagation method; noCloud without a cloudInitNoCloud volume; no user
// for the guest agent - and what the runtime would not take: a Secret
// name that is not one, a user name that is not one (the agent writes
// into that user's home directory).
func checkAccessCredentials(prefix string, spec *v1.VirtualMachineInstanceSpec) []string {
	noCloud := false
	for _, v := range spec.Volumes {
		noCloud = noCloud || v.CloudInitNoCloud != nil
	}
	var msgs []string
	for i, c := range spec.AccessCredentials {
		field := fmt.Sprintf("%s.accessCredentials[%d]", prefix, i)
		switch {
		case (c.SSHPublicKey == nil) == (c.UserPassword == nil):
			msgs = append(msgs, field+" must have exactly one access credential type set (sshPublicKey or userPassword)")
		case c.SSHPublicKey != nil:
			field += ".sshPublicKey"
			msgs = append(msgs, checkSecret(field, c.SSHPublicKey.Source.Secret)...)
			m := c.SSHPublicKey.PropagationMethod
			switch n := btoi(m.NoCloud != nil) + btoi(m.ConfigDrive != nil) + btoi(m.QemuGuestAgent != nil); {
			case n != 1:
				msgs = append(msgs, field+".propagationMethod must have exactly one propagationMethod set (qemuGuestAgent or noCloud)")
			case m.NoCloud != nil && !noCloud:
				msgs = append(msgs, fmt.Sprintf("%s.propagationMethod.noCloud requires a cloudInitNoCloud volume in %s.volumes", field, prefix))
			case m.QemuGuestAgent != nil:
				msgs = append(msgs, checkUsers(field+".propagationMethod.qemuGuestAgent.users", m.QemuGuestAgent.Users)...)
			}
		default:
			field += ".userPassword"
			msgs = append(msgs, checkSecret(field, c.UserPassword.Source.Secret)...)
			if c.UserPassword.PropagationMethod.QemuGuestAgent == nil {
				msgs = append(msgs, field+".propagationMethod must have exactly one propagationMethod set (qemuGuestAgent)")
			}
		}
	}
	return msgs
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkSecret(field string, s *v1.AccessCredentialSecretSource) []string {
	if s == nil {
		return []string{field + ".source must have exactly one source set (secret)"}
	}
	if errs := validation.IsDNS1123Subdomain(s.SecretName); len(errs) > 0 {
		return []string{fmt.Sprintf("%s.source.secret.secretName %q is not a Secret name in the VM's namespace: %s", field, s.SecretName, strings.Join(errs, ", "))}
	}
	return nil
}

func checkUsers(field string, users []string) []string {
	if len(users) == 0 {
		return []string{field + " requires at least one user"}
	}
	var msgs []string
	for i, u := range users {
		if err := vmisubset.GuestUser(u); err != nil {
			msgs = append(msgs, fmt.Sprintf("%s[%d]: %v", field, i, err))
		}
	}
	return msgs
}

// maySeeSecrets checks that u may read every Secret the accessCredentials
// name (in ns): whoever could not read a Secret must not get its keys into
// a guest they can log in to.
func (v Validator) maySeeSecrets(ctx context.Context, u authnv1.UserInfo, ns, prefix string, creds []v1.AccessCredential) error {
	for i, c := range creds {
		name := vmisubset.CredentialSecret(c)
		if name == "" {
			continue
		}
		ok, err := requester.Allowed(ctx, v.Client, u, &authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: name})
		if err != nil {
			return fmt.Errorf("checking whether %s may read Secret %s/%s: %w", u.Username, ns, name, err)
		}
		if !ok {
			return fmt.Errorf("%s.accessCredentials[%d]: %s may not get Secret %s/%s", prefix, i, u.Username, ns, name)
		}
	}
	return nil
}

// vmCredentialsChanged reports whether a VM request sets accessCredentials
// anew: on create, or an update that changes them.
func vmCredentialsChanged(req admission.Request, vm *v1.VirtualMachine) (bool, error) {
	creds := func(vm *v1.VirtualMachine) []v1.AccessCredential {
		if vm.Spec.Template == nil {
			return nil
		}
		return vm.Spec.Template.Spec.AccessCredentials
	}
	if len(creds(vm)) == 0 {
		return false, nil
	}
	if req.Operation != admissionv1.Update {
		return true, nil
	}
	var old v1.VirtualMachine
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false, decodeError{fmt.Errorf("decoding the old VirtualMachine: %w", err)}
	}
	return !equality.Semantic.DeepEqual(creds(&old), creds(vm)), nil
}
