package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	templatev1 "github.com/openshift/api/template/v1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/tasks/templates"
)

func TestNodeReady(t *testing.T) {
	f := framework.New(t)
	nodes, err := f.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != framework.WantNodes() {
		t.Fatalf("nodes = %d, want %d", len(nodes.Items), framework.WantNodes())
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				t.Errorf("node %s not Ready: %s", n.Name, c.Message)
			}
		}
	}
}

// TestPodRuns runs a pod that reads the API server through the kubernetes
// Service (kube-proxy's ClusterIP), so pod networking and Services are real.
func TestPodRuns(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	image := registryImage(t, f, "tekvirt/busybox")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "hello", Image: image,
				Command: []string{"sh", "-c", "echo hello from a pod && nc -w 5 10.96.0.1 443 </dev/null && echo service reachable"},
			}},
		},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, "hello", 2*time.Minute)
	logs, err := f.Kube.CoreV1().Pods(ns).GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "hello from a pod") || !strings.Contains(string(logs), "service reachable") {
		t.Fatalf("pod logs = %q", logs)
	}
}

// registryImage is the digest reference of the image `tekvirt up` pushed to
// the local registry as repo (by digest, and by tag "latest").
func registryImage(t *testing.T, _ *framework.Framework, repo string) string {
	t.Helper()
	ref, err := name.ParseReference(cluster.RegistryAddr+"/"+repo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatalf("%s in the local registry: %v", repo, err)
	}
	return cluster.RegistryAddr + "/" + repo + "@" + desc.Digest.String()
}

func TestGenerateSSHKeysWithTkn(t *testing.T) {
	f := framework.New(t)
	suffix := rand.String(5)
	pub, priv := "e2e-authorized-"+suffix, "e2e-key-"+suffix
	ns := framework.CatalogNamespace
	t.Cleanup(func() { deleteSecrets(f, ns, pub, priv) })
	cmd := exec.Command(f.Bin("tkn"), "task", "start", "generate-ssh-keys", "-n", ns, "-s", "generate-ssh-keys-task",
		"-p", "publicKeySecretName="+pub, "-p", "privateKeySecretName="+priv,
		"-p", "privateKeyConnectionOptions=user:root,disable-strict-host-key-checking:true",
		"-p", "additionalSSHKeygenOptions=-t rsa -b 2048 -C e2e",
		"--use-param-defaults", "--showlog")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("tkn task start: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "private key stored in secret "+ns+"/"+priv) {
		t.Fatalf("tkn output lacks the step's report:\n%s", out.String())
	}
	checkKeyPair(t, f, ns, pub, ns, priv)
}

// checkKeyPair verifies the private key parses, matches one public key entry
// and carries the connection options.
func checkKeyPair(t *testing.T, f *framework.Framework, pubNS, pub, privNS, priv string) {
	t.Helper()
	ps, err := f.Kube.CoreV1().Secrets(pubNS).Get(context.Background(), pub, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("public key secret: %v", err)
	}
	ks, err := f.Kube.CoreV1().Secrets(privNS).Get(context.Background(), priv, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("private key secret: %v", err)
	}
	if ks.Type != corev1.SecretTypeSSHAuth || string(ks.Data["user"]) != "root" {
		t.Fatalf("private key secret type %s data keys %v", ks.Type, keys(ks.Data))
	}
	signer, err := ssh.ParsePrivateKey(ks.Data[corev1.SSHAuthPrivateKey])
	if err != nil {
		t.Fatalf("private key does not parse: %v", err)
	}
	for _, v := range ps.Data {
		pk, _, _, _, err := ssh.ParseAuthorizedKey(v)
		if err == nil && bytes.Equal(pk.Marshal(), signer.PublicKey().Marshal()) {
			return
		}
	}
	t.Fatalf("no entry of %s/%s matches the private key (entries %v)", pubNS, pub, keys(ps.Data))
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func deleteSecrets(f *framework.Framework, ns string, names ...string) {
	for _, n := range names {
		_ = f.Kube.CoreV1().Secrets(ns).Delete(context.Background(), n, metav1.DeleteOptions{})
	}
}

// TestSamplesRun runs every task sample as written, in the catalog
// namespace, with what the samples name made first: the running guest VMs
// sample-vm and sample-vm-to-clean, three DataVolumes for the pruning, the
// disk sample-disk to clone (and push) and the claim sample-disk-copy to
// clone it to; import-disk's url is the test guest's, disk-uploader's
// destination a TLS registry of the test's (its CA in CERT_CONFIGMAP). The
// hosted-cluster tasks' samples run in TestHostedSamplesRun.
func TestSamplesRun(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	samples, err := filepath.Glob("../tasks/*/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	samples = slices.DeleteFunc(samples, func(s string) bool { return strings.HasPrefix(s, "../tasks/hosted-cluster-") })
	c := f.VMClient(t)
	ctx := context.Background()
	for _, name := range []string{"sample-vm", "sample-vm-to-clean"} {
		vm := framework.GuestVM(framework.CatalogNamespace, name, framework.GuestImage, v1.RunStrategyAlways)
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	}
	pruned := sampleDataVolumes(t, c, 3)
	sampleDisk(t, f, c, "sample-disk", "sample-disk-copy")
	guestURL := serveGuest(t, f) + "/guest.qcow2"
	reg := startTLSRegistry(t, f)
	regCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: framework.CatalogNamespace, Name: "sample-registry-ca-" + rand.String(5)},
		Data: map[string]string{"ca.crt": string(reg.ca)}}
	if err := c.Create(ctx, regCA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), regCA) })
	pushed := reg.host + "/tekvirt/sample-disk:" + rand.String(5)
	for _, s := range samples {
		t.Run(strings.TrimPrefix(s, "../tasks/"), func(t *testing.T) {
			var tr pipelinev1.TaskRun
			readSample(t, s, &tr)
			tr.Namespace = framework.CatalogNamespace
			switch tr.Spec.TaskRef.Name {
			case "modify-vm-template":
				sampleTemplate(t, f, tr.Spec.Params)
			case "import-disk":
				setParam(tr.Spec.Params, "url", guestURL)
			case "disk-uploader":
				setParam(tr.Spec.Params, "IMAGE_DESTINATION", pushed)
				tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: "CERT_CONFIGMAP", Value: *pipelinev1.NewStructuredValues(regCA.Name)})
			}
			r := framework.NewTaskRunRunner(t, f, &tr).CreateTaskRun()
			t.Cleanup(func() { // its Pod would hold the claims it mounted
				bg := metav1.DeletePropagationBackground
				_ = f.Tekton.TektonV1().TaskRuns(tr.Namespace).Delete(context.Background(), r.TaskRun().Name, metav1.DeleteOptions{PropagationPolicy: &bg})
			})
			r.ExpectSuccess()
			res := r.Results()
			deleteSecrets(f, res["publicKeySecretNamespace"], res["publicKeySecretName"])
			deleteSecrets(f, res["privateKeySecretNamespace"], res["privateKeySecretName"])
			// What a sample made (named by its results) goes with it.
			var made client.Object
			switch {
			case strings.HasPrefix(tr.Spec.TaskRef.Name, "create-vm-"):
				made = &v1.VirtualMachine{}
			case tr.Spec.TaskRef.Name == "copy-template" || tr.Spec.TaskRef.Name == "modify-vm-template":
				made = &templatev1.Template{}
			case tr.Spec.TaskRef.Name == "modify-data-object":
				made = &cdiv1.DataVolume{}
			case tr.Spec.TaskRef.Name == "prune-data-volumes":
				checkPruned(t, c, pruned, 2)
			case tr.Spec.TaskRef.Name == "import-disk" && res["format"] != "qcow2":
				t.Errorf("import-disk sample: results %v, want format qcow2", res)
			case tr.Spec.TaskRef.Name == "clone-disk" && res["method"] == "":
				t.Errorf("clone-disk sample: results %v, want a method", res)
			case tr.Spec.TaskRef.Name == "disk-uploader":
				ref, err := name.ParseReference(pushed)
				if err != nil {
					t.Fatal(err)
				}
				if desc, err := remote.Head(ref, remote.WithTransport(reg.tr)); err != nil || desc.Digest.String() != res["digest"] {
					t.Errorf("disk-uploader sample: digest result %q, the registry has %v (%v)", res["digest"], desc, err)
				}
			}
			if made != nil {
				made.SetNamespace(res["namespace"])
				made.SetName(res["name"])
				if err := f.VMClient(t).Delete(context.Background(), made); err != nil {
					t.Errorf("deleting what the sample made, %T %s/%s: %v", made, res["namespace"], res["name"], err)
				}
			}
		})
	}
}

// sampleDataVolumes makes n blank DataVolumes labelled tekvirt.io/sample=prune
// in the catalog namespace, a second apart (creation times have whole
// seconds), oldest first, and deletes what is left of them after the test.
func sampleDataVolumes(t *testing.T, c client.Client, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: framework.CatalogNamespace, GenerateName: "sample-prune-",
			Labels: map[string]string{"tekvirt.io/sample": "prune"}},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
		if err := c.Create(context.Background(), dv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), dv) })
		names = append(names, dv.Name)
	}
	return names
}

// sampleDisk makes the blank DataVolume name in the catalog namespace (its
// claim holds a disk.img) and waits for it, and the empty claim target on
// the same node (the hostpath class binds at once, to node-local volumes,
// and clone-disk's Pod mounts both); both are deleted after the test. The
// claims of an earlier run are released first: the finished TaskRun Pods
// that mounted them keep them Terminating (PVC protection) while they exist.
func sampleDisk(t *testing.T, f *framework.Framework, c client.Client, name, target string) {
	t.Helper()
	ctx := context.Background()
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: framework.CatalogNamespace, Name: name},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
	if err := c.Delete(ctx, dv.DeepCopy()); err == nil { // an earlier run ended before its cleanup
		framework.WaitGone(t, c, dv.DeepCopy(), time.Minute)
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	releaseClaim(t, f, framework.CatalogNamespace, name)
	releaseClaim(t, f, framework.CatalogNamespace, target)
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), dv) })
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	src := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: framework.CatalogNamespace, Name: name}, src); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: src.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	copyClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: framework.CatalogNamespace, Name: target,
		Annotations: map[string]string{hostpath.AnnProvisionOnNode: hostpath.VolumeNode(pv)}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}
	if err := c.Create(ctx, copyClaim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), copyClaim) })
}

// releaseClaim deletes claim ns/name and the Pods that mount it, and waits
// until it is gone.
func releaseClaim(t *testing.T, f *framework.Framework, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if pvc.DeletionTimestamp == nil { // an earlier run ended before its cleanup
		if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name {
				_ = f.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
	}
	framework.Eventually(t, time.Minute, "claim "+name+" of an earlier run gone", func() error {
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// setParam sets the string value of the param name.
func setParam(params pipelinev1.Params, name, value string) {
	for i := range params {
		if params[i].Name == name {
			params[i].Value = *pipelinev1.NewStructuredValues(value)
		}
	}
}

// checkPruned fails unless only the newest keep of names are left.
func checkPruned(t *testing.T, c client.Client, names []string, keep int) {
	t.Helper()
	framework.Eventually(t, time.Minute, "the oldest sample DataVolumes pruned", func() error {
		for i, name := range names {
			err := c.Get(context.Background(), client.ObjectKey{Namespace: framework.CatalogNamespace, Name: name}, &cdiv1.DataVolume{})
			if gone := apierrors.IsNotFound(err); gone != (i < len(names)-keep) {
				return fmt.Errorf("DataVolume %s: gone %v (%w)", name, gone, err)
			}
		}
		return nil
	})
}

// sampleTemplate is what the modify-vm-template sample modifies: a copy of
// the common template, named by the sample's templateName, in the catalog
// namespace.
func sampleTemplate(t *testing.T, f *framework.Framework, params pipelinev1.Params) {
	t.Helper()
	c := f.VMClient(t)
	ctx := context.Background()
	common := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift", Name: "tekvirt-guest-server-tiny"}, common); err != nil {
		t.Fatal(err)
	}
	var name string
	for _, p := range params {
		if p.Name == "templateName" {
			name = p.Value.StringVal
		}
	}
	cp, err := templates.Copy(common, name, framework.CatalogNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func sshKeysTaskRun(params map[string]string) *pipelinev1.TaskRun {
	tr := &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-ssh-", Namespace: framework.CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{
			ServiceAccountName: "generate-ssh-keys-task",
			TaskRef:            &pipelinev1.TaskRef{Name: "generate-ssh-keys"},
		},
	}
	for k, v := range params {
		tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: k, Value: *pipelinev1.NewStructuredValues(v)})
	}
	return tr
}

func TestGenerateSSHKeysBadInput(t *testing.T) {
	f := framework.New(t)
	ns := framework.CatalogNamespace
	t.Run("unsupported key type", func(t *testing.T) {
		framework.NewTaskRunRunner(t, f, sshKeysTaskRun(map[string]string{"additionalSSHKeygenOptions": "-t dsa"})).
			CreateTaskRun().ExpectFailure(`unsupported key type -t "dsa"`)
	})
	t.Run("existing private key secret is never overwritten", func(t *testing.T) {
		name := "e2e-precious-" + rand.String(5)
		t.Cleanup(func() { deleteSecrets(f, ns, name) })
		_, err := f.Kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string][]byte{"ssh-privatekey": []byte("keep me")},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		framework.NewTaskRunRunner(t, f, sshKeysTaskRun(map[string]string{"privateKeySecretName": name})).
			CreateTaskRun().ExpectFailure(fmt.Sprintf(`private key secret %s/%s already exists`, ns, name))
		got, err := f.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || string(got.Data["ssh-privatekey"]) != "keep me" || len(got.Data) != 1 {
			t.Fatalf("existing secret changed: %v %v", got.Data, err)
		}
	})
	t.Run("wrong param type is rejected by Tekton", func(t *testing.T) {
		tr := sshKeysTaskRun(nil)
		tr.Spec.Params = pipelinev1.Params{{Name: "privateKeyConnectionOptions", Value: *pipelinev1.NewStructuredValues("user:root")}}
		framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectFailure(`privateKeyConnectionOptions`)
	})
}

// TestCatalogIsRestored deletes and edits an installed Task and waits for
// the controller to put it back.
func TestCatalogIsRestored(t *testing.T) {
	f := framework.New(t)
	tasks := f.Tekton.TektonV1().Tasks(framework.CatalogNamespace)
	orig, err := tasks.Get(context.Background(), "generate-ssh-keys", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"description":"tampered"}}`)
	if _, err := tasks.Patch(context.Background(), orig.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "edited Task restored", func() error {
		got, err := tasks.Get(context.Background(), orig.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Spec.Description != orig.Spec.Description {
			return fmt.Errorf("description still %q", got.Spec.Description)
		}
		return nil
	})
	if err := tasks.Delete(context.Background(), orig.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "deleted Task restored", func() error {
		got, err := tasks.Get(context.Background(), orig.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return err
		}
		if err != nil {
			return err
		}
		if got.UID == orig.UID {
			return fmt.Errorf("still the old object")
		}
		return nil
	})
}
