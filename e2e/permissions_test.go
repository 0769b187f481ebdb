package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/hotplug"
	vmipod "github.com/tekvirt/tekvirt/controllers/vmi"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// permissionRow is a row of docs/security.md's permissions table.
type permissionRow struct{ who, check, answer string }

// publishedPermissions reads the table under "Permissions of tekvirt's
// components" in docs/security.md.
func publishedPermissions(t *testing.T) []permissionRow {
	t.Helper()
	f, err := os.Open("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []permissionRow
	in := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.Contains(line, "Permissions of tekvirt's components")
		case in && (strings.HasPrefix(line, "| controller |") || strings.HasPrefix(line, "| handler |") || strings.HasPrefix(line, "| operator |")):
			cells := strings.Split(line, "|")
			rows = append(rows, permissionRow{who: strings.TrimSpace(cells[1]),
				check: strings.Trim(strings.TrimSpace(cells[2]), "`"), answer: strings.TrimSpace(cells[3])})
		}
	}
	return rows
}

// nodeName is the name of the cluster's (first) node.
func nodeName(t *testing.T, f *framework.Framework) string {
	t.Helper()
	return f.Nodes(t)[0]
}

// TestComponentPermissionsAsPublished: every row of docs/security.md's
// table of the components' permissions, asked with `kubectl auth can-i` as
// that component, gets the answer the table gives.
func TestComponentPermissionsAsPublished(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	rows := publishedPermissions(t)
	as := map[string][]string{
		"controller": {"--as=" + ctrlconfig.ControllerUser},
		"operator":   {"--as=" + ctrlconfig.OperatorUser},
		"handler":    {"--as=" + ctrlconfig.HandlerUser},
		"multus":     {"--as=" + ctrlconfig.MultusUser},
	}
	mustHave := map[string]bool{"controller get secrets -n <tenant>": false, "controller get pods --subresource=log -n <tenant>": false,
		"controller create rolebindings -n <tenant>": false, "handler patch nodes": false, "operator create rolebindings -n <tenant>": false}
	for _, r := range rows {
		if _, ok := mustHave[r.who+" "+r.check]; ok {
			mustHave[r.who+" "+r.check] = true
		}
		args := append(append([]string{"auth", "can-i"}, strings.Fields(strings.ReplaceAll(r.check, "<tenant>", ns))...), as[r.who]...)
		cmd := exec.Command(f.Bin("kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
		out, err := cmd.Output()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		if got := strings.TrimSpace(string(out)); got != r.answer {
			t.Errorf("%s: kubectl auth can-i %s: %q, docs/security.md says %q", r.who, r.check, got, r.answer)
		}
	}
	for row, seen := range mustHave {
		if !seen {
			t.Errorf("docs/security.md's permissions table has no row %q", row)
		}
	}
}

// componentClient acts as user in groups (impersonated).
func componentClient(t *testing.T, f *framework.Framework, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return clientFor(t, cfg)
}

// tokenClient authenticates with token instead of the admin's certificate.
func tokenClient(t *testing.T, f *framework.Framework, token string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(f.Config)
	cfg.BearerToken = token
	return clientFor(t, cfg)
}

func clientFor(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, pipelinev1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handlerToken is the ServiceAccount token the kubelet mounted into the
// handler Pod on node, read from the Pod's volume on this machine.
func handlerToken(t *testing.T, f *framework.Framework, node string) string {
	t.Helper()
	pod := f.HandlerPod(t, node)
	files, err := filepath.Glob(filepath.Join(f.KubeletRoot(), "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "*", "token"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the token of handler Pod %s: %v %v", pod.Name, files, err)
	}
	token, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(token)
}

// refused checks that err is the admission policy's refusal naming want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: err = %v, want a policy refusal naming %q", what, err, want)
	}
}

// TestAttackControllerRights: what the controller's rights to create runs
// and launcher Pods, and the operator's to create RoleBindings, in every
// namespace cannot be turned into (were either compromised): a run or Pod
// as another ServiceAccount, with the node's files, network or privileges,
// or a binding that hands a role to either of them or to a user. The shapes
// they do create are admitted.
func TestAttackControllerRights(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	ctrl := componentClient(t, f, ctrlconfig.ControllerUser, "system:serviceaccounts", "system:serviceaccounts:"+ctrlconfig.Namespace)
	ctx := context.Background()
	dry := client.DryRunAll
	run := func(change func(*pipelinev1.TaskRun)) *pipelinev1.TaskRun {
		tr := &pipelinev1.TaskRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run-" + rand.String(5)},
			Spec: pipelinev1.TaskRunSpec{TaskSpec: &pipelinev1.TaskSpec{
				Steps:      []pipelinev1.Step{{Name: "s", Image: framework.GuestImage, Command: []string{"true"}}},
				Workspaces: []pipelinev1.WorkspaceDeclaration{{Name: "data"}}},
				Workspaces: []pipelinev1.WorkspaceBinding{{Name: "data", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}}}
		change(tr)
		return tr
	}
	if err := ctrl.Create(ctx, run(func(*pipelinev1.TaskRun) {}), dry); err != nil {
		t.Errorf("an inline run as the default ServiceAccount (what the controller creates): %v", err)
	}
	restricted := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), RunAsNonRoot: ptr(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	if err := ctrl.Create(ctx, run(func(tr *pipelinev1.TaskRun) { tr.Spec.TaskSpec.Steps[0].SecurityContext = restricted() }), dry); err != nil {
		t.Errorf("an inline run whose step has the restricted security context (the catalog's): %v", err)
	}
	for what, change := range map[string]func(*pipelinev1.TaskRun){
		"run as another ServiceAccount": func(tr *pipelinev1.TaskRun) { tr.Spec.ServiceAccountName = "admin" },
		"run with a pod template":       func(tr *pipelinev1.TaskRun) { tr.Spec.PodTemplate = &pod.PodTemplate{HostNetwork: true} },
		"run of a referenced task": func(tr *pipelinev1.TaskRun) {
			tr.Spec.TaskSpec, tr.Spec.TaskRef = nil, &pipelinev1.TaskRef{Name: "anything"}
		},
	} {
		refused(t, what, ctrl.Create(ctx, run(change), dry), "default ServiceAccount")
	}
	for what, change := range map[string]func(*pipelinev1.TaskRun){
		"run mounting the node's root": func(tr *pipelinev1.TaskRun) {
			tr.Spec.TaskSpec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		},
		"privileged step": func(tr *pipelinev1.TaskRun) {
			privileged := true
			tr.Spec.TaskSpec.Steps[0].SecurityContext = &corev1.SecurityContext{Privileged: &privileged}
		},
		"step restricted but adding a capability": func(tr *pipelinev1.TaskRun) {
			sc := restricted()
			sc.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
			tr.Spec.TaskSpec.Steps[0].SecurityContext = sc
		},
		"step restricted but running as root": func(tr *pipelinev1.TaskRun) {
			sc := restricted()
			sc.RunAsUser = ptr(int64(0))
			tr.Spec.TaskSpec.Steps[0].SecurityContext = sc
		},
		"run with a sidecar": func(tr *pipelinev1.TaskRun) {
			tr.Spec.TaskSpec.Sidecars = []pipelinev1.Sidecar{{Name: "side", Image: framework.GuestImage}}
		},
	} {
		refused(t, what, ctrl.Create(ctx, run(change), dry), "mount only ConfigMaps")
	}

	binding := func(role string, subject rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rb-" + rand.String(5)},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{subject}}
	}
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name}
	}
	const taskRole = "import-disk-task"
	if err := ctrl.Create(ctx, binding(taskRole, sa(ns, "import-disk-task")), dry); !apierrors.IsForbidden(err) {
		t.Errorf("a RoleBinding of a catalog role by the controller: err = %v, want a refusal (the operator binds the catalog's roles)", err)
	}
	// The controller binds the hosted-cluster task roles, to the provisioning
	// ServiceAccount of control-plane namespaces only; it runs the
	// provisioning pipeline only there and deletes only those namespaces.
	const hostedRole = "hosted-cluster-pki-task"
	for what, rb := range map[string]*rbacv1.RoleBinding{
		"hosted role bound in a namespace that is no control plane's": binding(hostedRole, sa(ns, "provision-hosted-cluster-pipeline")),
		"hosted role bound to another ServiceAccount":                 binding(hostedRole, sa(ns, "default")),
		"access role bound to a user":                                 binding("hosted-cluster-access-task", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory"}),
	} {
		refused(t, what, ctrl.Create(ctx, rb, dry), "binds only the hosted-cluster task roles")
	}
	pr := &pipelinev1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pr-" + rand.String(5)},
		Spec: pipelinev1.PipelineRunSpec{PipelineSpec: &pipelinev1.PipelineSpec{Tasks: []pipelinev1.PipelineTask{{Name: "t",
			TaskSpec: &pipelinev1.EmbeddedTask{TaskSpec: pipelinev1.TaskSpec{Steps: []pipelinev1.Step{{Name: "s", Image: framework.GuestImage}}}}}}},
			TaskRunTemplate: pipelinev1.PipelineTaskRunTemplate{ServiceAccountName: "provision-hosted-cluster-pipeline"}}}
	refused(t, "a PipelineRun in a tenant namespace", ctrl.Create(ctx, pr, dry), "runs only the inline provisioning pipeline")
	tenant := &corev1.Namespace{}
	if err := f.VMClient(t).Get(ctx, client.ObjectKey{Name: ns}, tenant); err != nil {
		t.Fatal(err)
	}
	refused(t, "deleting a tenant namespace", ctrl.Delete(ctx, tenant, dry), "only the hosted control-plane namespaces it manages")
	op := componentClient(t, f, ctrlconfig.OperatorUser)
	if err := op.Create(ctx, binding(taskRole, sa(ns, "import-disk-task")), dry); err != nil {
		t.Errorf("a task role bound to a ServiceAccount of the namespace (what the operator creates): %v", err)
	}
	for what, rb := range map[string]*rbacv1.RoleBinding{
		"task role bound to the controller":                     binding(taskRole, sa(ctrlconfig.Namespace, ctrlconfig.ControllerServiceAccount)),
		"task role bound to the operator":                       binding(taskRole, sa(ctrlconfig.Namespace, ctrlconfig.OperatorDeployment)),
		"task role bound to a user":                             binding(taskRole, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory"}),
		"task role bound to another namespace's ServiceAccount": binding(taskRole, sa("default", "default")),
		"task role bound to every authenticated user":           binding(taskRole, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:authenticated"}),
		"templates reader bound to a user":                      binding("tekvirt-common-templates-reader", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory"}),
	} {
		refused(t, what, op.Create(ctx, rb, dry), "binds only the catalog's task roles")
	}
	if err := op.Create(ctx, binding("tekvirt-common-templates-reader", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:authenticated"}), dry); err != nil {
		t.Errorf("the common templates' reader role bound to every authenticated user (what the operator creates): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.evil.example"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "evil.example", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}}}
	refused(t, "another CRD by the operator", op.Create(ctx, crd, dry), "only the Template API's CustomResourceDefinition")
	if err := op.Create(ctx, binding("admin", sa(ns, "default")), dry); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("admin bound by the operator: err = %v, want RBAC's refusal", err)
	}
	// The refusals below are the controller's policy's: Pod Security, which
	// the testbed enforces everywhere, would refuse some first.
	podSecurity(t, f, ns, "privileged")
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm1", UID: "0b5c1b7e-0000-4000-8000-000000000001"},
		Spec: framework.GuestVMI(framework.GuestImage, "vm1")}
	launcherPod := func(change func(*corev1.Pod)) *corev1.Pod {
		pod, err := vmipod.LauncherPod(vmi, framework.GuestImage)
		if err != nil {
			t.Fatal(err)
		}
		pod.OwnerReferences = nil // the VMI does not exist: a dry run
		change(pod)
		return pod
	}
	if err := ctrl.Create(ctx, launcherPod(func(*corev1.Pod) {}), dry); err != nil {
		t.Errorf("a launcher Pod (what the controller creates): %v", err)
	}
	refused(t, "a Pod that is no launcher", ctrl.Create(ctx, launcherPod(func(p *corev1.Pod) { p.Labels = nil }), dry), "only launcher and hotplug attachment Pods")
	refused(t, "a launcher Pod on the host network", ctrl.Create(ctx, launcherPod(func(p *corev1.Pod) {
		p.Spec.HostNetwork, p.Spec.SecurityContext.Sysctls = true, nil // the API server refuses the sysctl there itself
	}), dry), "only launcher and hotplug attachment Pods")
	// A hotplugged volume's attachment Pod, under the same rules.
	launcher := launcherPod(func(p *corev1.Pod) {
		p.Name, p.UID, p.Spec.NodeName = "virt-launcher-vm1-x", "0b5c1b7e-0000-4000-8000-000000000002", "node"
	})
	attachment := func(change func(*corev1.Pod)) *corev1.Pod {
		pod := hotplug.AttachmentPod(vmi, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data", Hotpluggable: true}}}, launcher, framework.GuestImage)
		pod.OwnerReferences = nil
		change(pod)
		return pod
	}
	if err := ctrl.Create(ctx, attachment(func(*corev1.Pod) {}), dry); err != nil {
		t.Errorf("an attachment Pod (what the controller creates): %v", err)
	}
	refused(t, "an attachment Pod on the host network", ctrl.Create(ctx, attachment(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), dry), "only launcher and hotplug attachment Pods")
	refused(t, "an attachment Pod mounting the node's /", ctrl.Create(ctx, attachment(func(p *corev1.Pod) {
		p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
	}), dry), "mounts nothing of the node")
	hostPath := func(path string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}
		}
	}
	for _, path := range []string{"/", "/var/lib/tekvirt/images", "/var/lib/tekvirt/vms/" + string(vmi.UID)} {
		refused(t, "a launcher Pod mounting the node's "+path, ctrl.Create(ctx, launcherPod(hostPath(path)), dry), "mounts nothing of the node")
	}
	for name, change := range map[string]func(*corev1.Pod){
		"privileged": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Privileged, p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true), nil
		},
		"adding a capability": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		},
		"run as root": func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser, p.Spec.SecurityContext.RunAsNonRoot = ptr(int64(0)), ptr(false)
		},
		"with another sysctl": func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"})
		},
	} {
		refused(t, "a launcher Pod "+name, ctrl.Create(ctx, launcherPod(change), dry), `Pod Security "restricted"`)
	}
	// Launcher Pods meet "restricted" (KubeVirt's need the namespace at
	// "baseline" or more).
	podSecurity(t, f, ns, "restricted")
	if err := ctrl.Create(ctx, launcherPod(func(*corev1.Pod) {}), dry); err != nil {
		t.Errorf("a launcher Pod in a namespace enforcing Pod Security restricted: %v", err)
	}

	// It deletes only the target Pods of migrations and attachment Pods.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-pod"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: framework.GuestImage, SecurityContext: restricted()}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))}}}
	if err := f.VMClient(t).Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	refused(t, "deleting a Pod that is no migration's target", ctrl.Delete(ctx, plain.DeepCopy(), dry), "only the target launcher Pods of migrations and hotplug attachment Pods")
	target := launcherPod(func(p *corev1.Pod) { p.Name, p.GenerateName, p.Labels[v1.MigrationJobLabel] = "target", "", "mig-1" })
	if err := f.VMClient(t).Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Delete(ctx, target.DeepCopy(), dry); err != nil {
		t.Errorf("deleting a migration's target launcher Pod (what the controller deletes): %v", err)
	}
	held := attachment(func(p *corev1.Pod) { p.Name, p.GenerateName = "hp-volume-held", "" })
	if err := f.VMClient(t).Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Delete(ctx, held.DeepCopy(), dry); err != nil {
		t.Errorf("deleting an attachment Pod (what the controller deletes): %v", err)
	}

	// It deletes only the transfer claims of snapshot clones.
	tenantClaim := func(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
		if err := f.VMClient(t).Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	refused(t, "deleting a tenant's claim", ctrl.Delete(ctx, tenantClaim("tenant-disk", nil), dry), "only the transfer claims of DataVolumes cloning another namespace's VolumeSnapshot")
	if err := ctrl.Delete(ctx, tenantClaim("transfer", map[string]string{datavolume.TransferLabel: "dv-1"}), dry); err != nil {
		t.Errorf("deleting a transfer claim (what the controller deletes): %v", err)
	}

	// Nothing above was stored (dry runs), so nothing can have leaked.
	if l, err := f.Kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("RoleBindings left in %s: %v %v", ns, l, err)
	}
}

// podSecurity sets the Pod Security level ns enforces (as an admin).
func podSecurity(t *testing.T, f *framework.Framework, ns, level string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"` + level + `"}}}`)
	if _, err := f.Kube.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAttackTenantNodePod: a tenant with edit cannot run a Pod that reaches
// the node (its files, network or privileges) in their namespace, which
// enforces Pod Security baseline, nor lift that by relabelling it.
func TestAttackTenantNodePod(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	tenant := userClient(t, f, ns, "mallory")
	ctx := context.Background()
	pod := func(name string, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: registryImage(t, f, "tekvirt/busybox"), Command: []string{"cat", "/host/etc/shadow"}}}}}
		change(p)
		return p
	}
	dry := client.DryRunAll
	if err := tenant.Create(ctx, pod("plain", func(*corev1.Pod) {}), dry); err != nil {
		t.Errorf("a plain Pod (the control): %v", err)
	}
	for name, change := range map[string]func(*corev1.Pod){
		"host-root": func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		},
		"host-network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"privileged": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		},
	} {
		if err := tenant.Create(ctx, pod(name, change), dry); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("%s Pod by a tenant: err = %v, want a Pod Security refusal", name, err)
		}
	}
	relabel := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`))
	if err := tenant.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, relabel); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a tenant relabelling its namespace privileged: err = %v, want RBAC's refusal", err)
	}
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("Pods left (all were dry runs): %v %v", pods, err)
	}
}

// TestAttackHandlerRights: a node's handler (were its node compromised,
// its token read from the handler Pod's volume on the node) may change its
// own Node and the VMIs placed on it, nothing else: not another Node, not a
// VMI that is not on its node. A token of the handler's ServiceAccount not
// bound to a Pod on a node changes no Node at all.
func TestAttackHandlerRights(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	node := nodeName(t, f)
	handler := tokenClient(t, f, handlerToken(t, f, node))
	ctx := context.Background()
	admin := f.VMClient(t)
	ghost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-e2e-ghost-" + rand.String(5)},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "tekvirt.io/e2e-ghost", Effect: corev1.TaintEffectNoExecute}}}}
	if err := admin.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ghost) })

	annotate := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"tekvirt.io/e2e-attack":"1"}}}`))
	if err := handler.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, annotate, client.DryRunAll); err != nil {
		t.Errorf("the handler annotating its own Node: %v", err)
	}
	refused(t, "the handler annotating another Node", handler.Patch(ctx, ghost.DeepCopy(), annotate, client.DryRunAll), "may change only that Node")
	unbound, err := f.Kube.CoreV1().ServiceAccounts(ctrlconfig.NodeNamespace).CreateToken(ctx, ctrlconfig.HandlerDaemonSet,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "a handler token bound to no Pod annotating a Node",
		tokenClient(t, f, unbound.Status.Token).Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, annotate, client.DryRunAll),
		"may change only that Node")

	spec := framework.GuestVMI(framework.GuestImage, "elsewhere")
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": ghost.Name}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"}, Spec: spec}
	if err := admin.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	refused(t, "the handler changing a VMI not on its node", handler.Patch(ctx, vmi.DeepCopy(), annotate), "may change only the VMIs on that node")
	status := client.RawPatch(types.MergePatchType, []byte(`{"status":{"nodeName":"`+node+`","phase":"Scheduled"}}`))
	refused(t, "the handler claiming a VMI for its node", handler.Status().Patch(ctx, vmi.DeepCopy(), status), "may change only the VMIs on that node")
	// Nor may it name itself a migration's target: only a VMI the
	// controller is migrating to its node is its too.
	target := client.RawPatch(types.MergePatchType, []byte(`{"status":{"nodeName":"`+node+`","migrationState":{"targetNode":"`+node+`","migrationUid":"x"}}}`))
	refused(t, "the handler naming its node a VMI's migration target", handler.Status().Patch(ctx, vmi.DeepCopy(), target), "may change only the VMIs on that node")
	got := &v1.VirtualMachineInstance{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations["tekvirt.io/e2e-attack"] != "" || got.Status.NodeName != "" {
		t.Errorf("the refused changes are on the VMI: annotations %v, nodeName %q", got.Annotations, got.Status.NodeName)
	}
}
