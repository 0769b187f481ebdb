package datavolume

import (
	"fmt"
	"sort"
	"strings"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// DataVolumeLabel marks a DataVolume's import TaskRuns, as CDI labels its pods.
const DataVolumeLabel = "cdi.kubevirt.io/dataVolume"

// certDir is where a source's certConfigMap is mounted in the step.
const certDir = "/etc/tekvirt/import-certs"

// Supported names the first part of the spec this controller cannot
// import; the admission webhook rejects such DataVolumes with it.
func Supported(dv *cdiv1.DataVolume) error {
	src := dv.Spec.Source
	if ref := dv.Spec.SourceRef; ref != nil {
		switch {
		case src != nil:
			return fmt.Errorf("spec.source and spec.sourceRef are exclusive")
		case ref.Kind != cdiv1.DataVolumeDataSource:
			return fmt.Errorf("spec.sourceRef.kind %q is not supported (%s)", ref.Kind, cdiv1.DataVolumeDataSource)
		}
		return contentType(dv)
	}
	if src == nil {
		return fmt.Errorf("spec.source or spec.sourceRef is required")
	}
	set := sourcesSet(src)
	if len(set) != 1 {
		return fmt.Errorf("spec.source must set exactly one source, has %v", set)
	}
	if err := sourceSupported(set[0], src); err != nil {
		return err
	}
	return contentType(dv)
}

// SnapshotGroup is the API group of VolumeSnapshots.
const SnapshotGroup = "snapshot.storage.k8s.io"

func contentType(dv *cdiv1.DataVolume) error {
	if dv.Spec.ContentType != "" && dv.Spec.ContentType != cdiv1.DataVolumeKubeVirt {
		return fmt.Errorf("spec.contentType %q is not supported (kubevirt)", dv.Spec.ContentType)
	}
	return nil
}

// sourcesSet lists the source types set, by their JSON names, sorted.
func sourcesSet(src *cdiv1.DataVolumeSource) []string {
	var set []string
	for name, ok := range map[string]bool{"http": src.HTTP != nil, "registry": src.Registry != nil, "blank": src.Blank != nil,
		"pvc": src.PVC != nil, "upload": src.Upload != nil, "s3": src.S3 != nil, "gcs": src.GCS != nil,
		"imageio": src.Imageio != nil, "vddk": src.VDDK != nil, "snapshot": src.Snapshot != nil} {
		if ok {
			set = append(set, name)
		}
	}
	sort.Strings(set)
	return set
}

func sourceSupported(name string, src *cdiv1.DataVolumeSource) error {
	switch name {
	case "http":
		return httpSupported(src.HTTP)
	case "registry":
		return registrySupported(src)
	case "pvc":
		if src.PVC.Name == "" {
			return fmt.Errorf("spec.source.pvc.name is required")
		}
	case "snapshot":
		return snapshotSupported(src.Snapshot)
	case "blank", "upload":
	default:
		return fmt.Errorf("spec.source.%s is not supported (supported: http, registry, upload, blank, pvc, snapshot)", name)
	}
	return nil
}

// snapshotSupported admits a VolumeSnapshot (of the DataVolume's own
// namespace when namespace is empty; another's is cloned from, see
// snapshottransfer.go).
func snapshotSupported(src *cdiv1.DataVolumeSourceSnapshot) error {
	if src.Name == "" {
		return fmt.Errorf("spec.source.snapshot.name is required")
	}
	return nil
}

func httpSupported(h *cdiv1.DataVolumeSourceHTTP) error {
	if h.URL == "" {
		return fmt.Errorf("spec.source.http.url is required")
	}
	if len(h.ExtraHeaders) > 0 || len(h.SecretExtraHeaders) > 0 || h.InsecureSkipVerify != nil {
		return fmt.Errorf("spec.source.http: extraHeaders, secretExtraHeaders and insecureSkipVerify are not supported")
	}
	return nil
}

func registrySupported(src *cdiv1.DataVolumeSource) error {
	r := src.Registry
	if r.URL == nil || r.ImageStream != nil {
		return fmt.Errorf("spec.source.registry: only url is supported (not imageStream)")
	}
	if *r.URL == "" {
		return fmt.Errorf("spec.source.registry.url is required")
	}
	if nodePull(src) && (r.SecretRef != nil || r.CertConfigMap != nil) {
		return fmt.Errorf("spec.source.registry: secretRef and certConfigMap do not apply to pullMethod node (the node's runtime pulls the image)")
	}
	return nil
}

// claimFor is the PVC a DataVolume gets, from spec.storage or spec.pvc.
// spec.storage without access modes gets those of class (nil when it is
// not known), as CDI takes them from the class's StorageProfile.
func claimFor(dv *cdiv1.DataVolume, class *storagev1.StorageClass) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: dv.Name,
		Labels: map[string]string{"app": "containerized-data-importer"}}}
	switch {
	case dv.Spec.PVC != nil:
		pvc.Spec = *dv.Spec.PVC.DeepCopy()
	case dv.Spec.Storage != nil:
		s := dv.Spec.Storage
		pvc.Spec = corev1.PersistentVolumeClaimSpec{AccessModes: s.AccessModes, StorageClassName: s.StorageClassName,
			VolumeMode: s.VolumeMode, Resources: s.Resources, Selector: s.Selector}
	default:
		return nil, fmt.Errorf("spec.storage or spec.pvc is required")
	}
	if n := dv.Annotations[hostpath.AnnProvisionOnNode]; n != "" {
		// The CSI driver's provisioner of that node takes a claim with
		// its node selected; the annotation of the provisioner before it
		// stays for those who read it.
		pvc.Annotations = map[string]string{hostpath.AnnProvisionOnNode: n, hostpath.AnnSelectedNode: n}
	}
	if len(pvc.Spec.AccessModes) == 0 {
		pvc.Spec.AccessModes = hostpath.AccessModes(class)
	}
	if src := dv.Spec.Source; src != nil && src.Snapshot != nil {
		// The CSI driver restores it: the claim is the snapshot's copy.
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(SnapshotGroup), Kind: "VolumeSnapshot", Name: src.Snapshot.Name}
	}
	if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		return nil, fmt.Errorf("spec.storage.resources.requests.storage is required")
	}
	if m := pvc.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		return nil, fmt.Errorf("volumeMode Block is not supported (Filesystem)")
	}
	return pvc, nil
}

// RunName names the import run of an attempt.
func RunName(dv *cdiv1.DataVolume, attempt int32) string {
	name := fmt.Sprintf("%s-import-%d", dv.Name, attempt)
	if len(name) > 63 {
		name = fmt.Sprintf("%s-import-%d", dv.Name[:63-len(fmt.Sprintf("-import-%d", attempt))], attempt)
	}
	return name
}

// ImportRun is the TaskRun that imports dv's source into pvc: the catalog's
// import-disk task inline, with the source's secret as env and its CA
// ConfigMap as a mounted directory; for an upload, or a clone from another
// namespace, its step receives the disk, verifying tokens with uploadKey.
func ImportRun(dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, task *pipelinev1.Task, attempt int32, uploadKey string) *pipelinev1.TaskRun {
	spec := task.Spec.DeepCopy()
	capacity := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	params := map[string]string{"capacity": capacity.String(), "size": capacity.String()}
	step := &spec.Steps[0]
	switch src := dv.Spec.Source; {
	case src.HTTP != nil:
		params["url"], params["checksum"] = src.HTTP.URL, src.HTTP.Checksum
	case nodePull(src):
		// The import step runs in the image itself; see pullByNode below.
	case src.Registry != nil:
		params["registry"] = strings.TrimPrefix(*src.Registry.URL, "docker://")
	case src.Blank != nil:
		step.Args = append(step.Args, "--blank")
	}
	SourceAccess(spec, dv.Spec.Source)
	if Receives(dv) {
		step.Args = append(step.Args, fmt.Sprintf("--upload-addr=:%d", datastep.ProgressPort),
			"--upload-public-key="+uploadKey, "--upload-claim="+pvc.Name, "--upload-claim-uid="+string(pvc.UID))
	} else {
		step.Args = append(step.Args, fmt.Sprintf("--progress-addr=:%d", datastep.ProgressPort))
	}
	if nodePull(dv.Spec.Source) {
		pullByNode(spec, strings.TrimPrefix(*dv.Spec.Source.Registry.URL, "docker://"))
	}
	run := &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: RunName(dv, attempt),
			Labels: map[string]string{DataVolumeLabel: dv.Name, "app.kubernetes.io/part-of": "tekvirt"}},
		Spec: pipelinev1.TaskRunSpec{
			TaskSpec:   spec,
			Workspaces: []pipelinev1.WorkspaceBinding{{Name: "data", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}},
		},
	}
	for _, p := range spec.Params {
		if v, ok := params[p.Name]; ok && v != "" {
			run.Spec.Params = append(run.Spec.Params, pipelinev1.Param{Name: p.Name, Value: *pipelinev1.NewStructuredValues(v)})
		}
	}
	return run
}

// SourceAccess gives the import-disk step of spec what reading src takes,
// so that it needs no API rights and the controller reads no Secret: the
// source's secretRef as environment and its certConfigMap as a directory,
// both handed over by the kubelet.
func SourceAccess(spec *pipelinev1.TaskSpec, src *cdiv1.DataVolumeSource) {
	var secret, certs string
	switch {
	case src.HTTP != nil:
		secret, certs = src.HTTP.SecretRef, src.HTTP.CertConfigMap
	case src.Registry != nil:
		secret, certs = ptr.Deref(src.Registry.SecretRef, ""), ptr.Deref(src.Registry.CertConfigMap, "")
	}
	step := &spec.Steps[0]
	if certs != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "import-certs", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: certs}}}})
		step.VolumeMounts = append(step.VolumeMounts, corev1.VolumeMount{Name: "import-certs", MountPath: certDir, ReadOnly: true})
		step.Args = append(step.Args, "--cert-dir="+certDir)
	}
	if secret != "" {
		for _, kv := range [][2]string{{datastep.AccessKeyEnv, datastep.AccessKeyIDKey}, {datastep.SecretKeyEnv, datastep.SecretKeyKey}} {
			step.Env = append(step.Env, corev1.EnvVar{Name: kv[0], ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: kv[1]}}})
		}
	}
}

// nodePull says whether src is a registry image the node's runtime pulls
// (CDI's pullMethod node), rather than the import step.
func nodePull(src *cdiv1.DataVolumeSource) bool {
	return src != nil && src.Registry != nil && src.Registry.PullMethod != nil && *src.Registry.PullMethod == cdiv1.RegistryPullNode
}

// stepBin is where a node-pulled import finds tekvirt-step.
const stepBin = "/tekvirt-bin"

// containerDiskUser is the user a node-pulled import runs as (KubeVirt's
// qemu user; images.ContainerDiskOwner).
const containerDiskUser = 107

// pullByNode makes the import step of spec run in image itself, so that
// the kubelet pulls it as any Pod's image (with the node's registry
// configuration and credentials): a first step copies tekvirt-step into a shared emptyDir,
// the import step runs that copy and imports the image's /disk file.
func pullByNode(spec *pipelinev1.TaskSpec, image string) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "tekvirt-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mount := corev1.VolumeMount{Name: "tekvirt-bin", MountPath: stepBin}
	imp := &spec.Steps[0]
	cp := pipelinev1.Step{Name: "copy-importer", Image: imp.Image, Command: []string{imp.Command[0], "copy-self", "--to=" + stepBin + "/tekvirt-step"},
		VolumeMounts: []corev1.VolumeMount{mount}, ComputeResources: imp.ComputeResources, SecurityContext: imp.SecurityContext.DeepCopy()}
	imp.Image = image
	// Always: the kubelet asks the registry with the node's credentials
	// each time, so an image another namespace pulled with its own pull
	// secret is never used from the node's cache.
	imp.ImagePullPolicy = corev1.PullAlways
	// The image's user is the image author's, often root, which the
	// restricted context refuses: run as KubeVirt's qemu user, who owns
	// the files of containerDisks built as KubeVirt documents.
	sc := imp.SecurityContext.DeepCopy()
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	sc.RunAsUser = ptr.To(int64(containerDiskUser))
	imp.SecurityContext = sc
	imp.Command = append([]string{stepBin + "/tekvirt-step"}, imp.Command[1:]...)
	imp.Args = append(imp.Args, "--container-disk-dir=/disk")
	imp.VolumeMounts = append(imp.VolumeMounts, mount)
	spec.Steps = append([]pipelinev1.Step{cp}, spec.Steps...)
}

// cloneRun is the TaskRun that clones the source PVC's disk into pvc: the
// catalog's clone-disk task inline, mounting both claims.
func cloneRun(dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, task *pipelinev1.Task, attempt int32) *pipelinev1.TaskRun {
	capacity := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: RunName(dv, attempt),
			Labels: map[string]string{DataVolumeLabel: dv.Name, "app.kubernetes.io/part-of": "tekvirt"}},
		Spec: pipelinev1.TaskRunSpec{
			TaskSpec: task.Spec.DeepCopy(),
			Params:   pipelinev1.Params{{Name: "size", Value: *pipelinev1.NewStructuredValues(capacity.String())}},
			Workspaces: []pipelinev1.WorkspaceBinding{
				{Name: "source", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: dv.Spec.Source.PVC.Name, ReadOnly: true}},
				{Name: "target", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}},
			},
		},
	}
}

// permanent reports whether a failed run's step exited with the code for
// failures a retry cannot fix.
func permanent(run *pipelinev1.TaskRun) bool {
	for _, s := range run.Status.Steps {
		if s.Terminated != nil && s.Terminated.ExitCode == datastep.PermanentExitCode {
			return true
		}
	}
	return false
}
