package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAccessCredentials: kubevirt-tekton-tasks' flow - generate-ssh-keys,
// a VM whose accessCredentials name the public key Secret (as `virtctl
// create vm --access-cred` prints it), execute-in-vm over SSH with the
// private key Secret - and `virtctl ssh` with that key. The guest agent
// writes each listed user's authorized_keys and rewrites it when the
// Secret changes; a password Secret sets the user's password; noCloud
// keys reach the guest through the seed. A Secret turned to garbage is
// reported on the VMI and leaves the user's keys as they were. Refused at
// admission: a user name that is a path, a Secret of another namespace,
// and a Secret the user may not read.
func TestAccessCredentials(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	f.BindTaskRole(t, ns, "generate-ssh-keys")
	framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("generate-ssh-keys", map[string]any{
		"publicKeySecretName": "authorized", "publicKeySecretNamespace": ns,
		"privateKeySecretName": "client", "privateKeySecretNamespace": ns,
		"privateKeyConnectionOptions": []string{"user:root", "disable-strict-host-key-checking:true"},
	})).CreateTaskRun().ExpectSuccess()
	clientKey := privateKeyFile(t, f, ns, "client")
	_, noCloudKey := sshKeyFile(t)
	_, guestKey := sshKeyFile(t)
	const password = "tekvirt s3cret:1"
	for name, data := range map[string]map[string]string{
		"passwords": {"root": password}, "nocloud-keys": {"key": noCloudKey}, "guest-keys": {"key": guestKey},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
		if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	create := func(args ...string) {
		t.Helper()
		manifest := virtctl(t, append([]string{"create", "vm", "--memory=256Mi", "--volume-containerdisk=src:" + framework.GuestImage}, args...)...)
		if out, err := kubectlApply(f, ns, manifest); err != nil {
			t.Fatalf("virtctl create vm %s | kubectl apply: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	create("--name=vcred", "--access-cred=type:ssh,src:authorized,user:root", "--access-cred=type:password,src:passwords")
	userData := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nhostname: vnocloud\n"))
	create("--name=vnocloud", "--cloud-init-user-data="+userData,
		"--access-cred=type:ssh,src:nocloud-keys,method:nocloud", "--access-cred=type:ssh,src:guest-keys,user:guest")

	synced := func(vmi *v1.VirtualMachineInstance) error {
		if err := framework.AgentConnected(vmi); err != nil {
			return err
		}
		return credentialsCondition(vmi, corev1.ConditionTrue, "")
	}
	vmi := framework.WaitVMI(t, c, ns, "vcred", 4*time.Minute, "credentials synchronized", synced)
	noCloudVMI := framework.WaitVMI(t, c, ns, "vnocloud", 4*time.Minute, "credentials synchronized", synced)
	guest := func(vmi *v1.VirtualMachineInstance, script string) string {
		t.Helper()
		res, err := podLauncher(t, f, f.LauncherPod(t, vmi)).Exec(ctx, guestexec.Request{Command: "/bin/sh", Args: []string{"-c", script}, TimeoutSeconds: 10})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s in the guest of %s: %v %+v", script, vmi.Name, err, res)
		}
		return string(res.Stdout)
	}

	// The catalog's execute-in-vm over SSH with the generated key, and
	// virtctl ssh with the same key.
	f.BindTaskRole(t, ns, "execute-in-vm")
	tr := framework.ExecuteInVMTaskRun(ns, "vcred", "echo over-ssh-$((6*7)) as $(id -un)", "3m")
	tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: "secretName", Value: *pipelinev1.NewStructuredValues("client")})
	framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectSuccess().ExpectLogs("over-ssh-42 as root")
	sshArgs := func(key, target string) []string {
		return []string{"ssh", target, "-n", ns, "-i", key, "--local-ssh-opts=-oStrictHostKeyChecking=no",
			"--local-ssh-opts=-oUserKnownHostsFile=/dev/null", "--command", "echo via-virtctl-$((6*7))"}
	}
	if out := virtctl(t, sshArgs(clientKey, "root@vm/vcred")...); !strings.Contains(out, "via-virtctl-42") {
		t.Errorf("virtctl ssh with the generated key:\n%s", out)
	}

	// The password, as chpasswd stored it for the agent.
	check := fmt.Sprintf(`h=$(sed -n 's/^root:\([^:]*\):.*/\1/p' /etc/shadow); s=$(echo "$h" | cut -d'$' -f3); [ "$(mkpasswd -m sha512 '%s' "$s")" = "$h" ] && echo match`, password)
	if out := guest(vmi, check); !strings.Contains(out, "match") {
		t.Errorf("root's password in /etc/shadow is not the Secret's: %q", out)
	}

	// noCloud: root's key from the seed; the agent's for user guest.
	if out := guest(noCloudVMI, "cat /root/.ssh/authorized_keys"); !strings.Contains(out, noCloudKey) {
		t.Errorf("root's authorized_keys in vnocloud lacks the noCloud key:\n%s", out)
	}
	if out := guest(noCloudVMI, "cat /home/guest/.ssh/authorized_keys; stat -c '%U %a' /home/guest/.ssh/authorized_keys"); !strings.Contains(out, guestKey) || !strings.Contains(out, "guest 600") {
		t.Errorf("guest's authorized_keys in vnocloud:\n%s", out)
	}

	// Both Secrets change at once: vcred's to a new key (rewritten in the
	// guest, the old key gone), vnocloud's guest-keys to garbage (reported,
	// guest's keys untouched). The kubelet brings the change into the Pod
	// within its sync period.
	newKey, newLine := sshKeyFile(t)
	patch := func(name string, data map[string][]byte) {
		s, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = data
		if _, err := f.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("authorized", map[string][]byte{"key": []byte(newLine + "\n")})
	patch("guest-keys", map[string][]byte{"key": []byte("this is not an SSH key")})
	framework.WaitVMI(t, c, ns, "vnocloud", 3*time.Minute, "the garbage reported", func(vmi *v1.VirtualMachineInstance) error {
		return credentialsCondition(vmi, corev1.ConditionFalse, "Secret guest-keys key key line 1 is not an SSH public key")
	})
	framework.Eventually(t, 3*time.Minute, "vcred's root keys rewritten", func() error {
		if out := guest(vmi, "cat /root/.ssh/authorized_keys"); strings.TrimSpace(out) != newLine {
			return fmt.Errorf("authorized_keys %q", out)
		}
		return nil
	})
	if out := virtctl(t, sshArgs(newKey, "root@vm/vcred")...); !strings.Contains(out, "via-virtctl-42") {
		t.Errorf("virtctl ssh with the new key:\n%s", out)
	}
	if out := guest(noCloudVMI, "cat /home/guest/.ssh/authorized_keys"); strings.TrimSpace(out) != guestKey {
		t.Errorf("guest's authorized_keys changed after its Secret turned to garbage:\n%s", out)
	}
	wantEvent(t, f, ns, "vnocloud", "AccessCredentialsSyncFailed", "not an SSH public key")

	// Refused at admission, naming the field.
	bindUserFor(t, f, ns, "vm-only", "tekvirt-edit", &authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: v1.SchemeGroupVersion.Group, Resource: "virtualmachines"})
	for _, tc := range []struct {
		args []string
		edit func(string) string // a hand edit of virtctl's output
		as   string
		want string
	}{
		{args: []string{"--access-cred=type:ssh,src:authorized,user:../../etc"}, want: `qemuGuestAgent.users[0]: "../../etc" is not a guest user name`},
		// virtctl itself refuses "other/keys".
		{args: []string{"--access-cred=type:ssh,src:keys,user:root"}, edit: func(m string) string {
			return strings.Replace(m, "secretName: keys", "secretName: other/keys", 1)
		}, want: `secretName "other/keys" is not a Secret name`},
		{args: []string{"--access-cred=type:ssh,src:authorized,user:root"}, as: "vm-only", want: "vm-only may not get Secret " + ns + "/authorized"},
	} {
		manifest := virtctl(t, append([]string{"create", "vm", "--name=refused", "--run-strategy=Halted", "--memory=256Mi",
			"--volume-containerdisk=src:" + framework.GuestImage}, tc.args...)...)
		if tc.edit != nil {
			manifest = tc.edit(manifest)
		}
		var as []string
		if tc.as != "" {
			as = append(as, tc.as)
		}
		if out, err := kubectlApply(f, ns, manifest, as...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v as %q: %v, want a refusal with %q\n%s", tc.args, tc.as, err, tc.want, out)
		}
	}
	vmiRefused := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"}, Spec: framework.GuestVMI(framework.GuestImage, "refused")}
	vmiRefused.Spec.AccessCredentials = vmi.Spec.AccessCredentials
	if err := c.Create(ctx, vmiRefused); err != nil {
		t.Fatalf("a VMI with the credentials of vcred, by an admin: %v", err)
	}
	_ = c.Delete(ctx, vmiRefused)
}

// credentialsCondition checks the VMI's AccessCredentialsSynchronized
// condition: status, and a message containing msg.
func credentialsCondition(vmi *v1.VirtualMachineInstance, status corev1.ConditionStatus, msg string) error {
	for _, cond := range vmi.Status.Conditions {
		if cond.Type != v1.VirtualMachineInstanceAccessCredentialsSynchronized {
			continue
		}
		if cond.Status != status || !strings.Contains(cond.Message, msg) {
			return fmt.Errorf("AccessCredentialsSynchronized %s %q", cond.Status, cond.Message)
		}
		return nil
	}
	return fmt.Errorf("no AccessCredentialsSynchronized condition")
}

// privateKeyFile writes the private key of a generate-ssh-keys Secret for
// ssh -i.
func privateKeyFile(t *testing.T, f *framework.Framework, ns, name string) string {
	t.Helper()
	s, err := f.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_"+name)
	if err := os.WriteFile(path, s.Data[corev1.SSHAuthPrivateKey], 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantEvent waits for an event of the object named name with reason and
// a message containing msg.
func wantEvent(t *testing.T, f *framework.Framework, ns, name, reason, msg string) {
	t.Helper()
	framework.Eventually(t, time.Minute, reason+" event of "+name, func() error {
		list, err := f.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s %q", len(list.Items), reason, msg)
	})
}
