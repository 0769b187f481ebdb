package hostedclustercontrolplane

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Secrets this task writes besides the contract's local admin kubeconfig.
const (
	ServingSecret             = "kube-apiserver-serving"
	TokensSecret              = "kube-apiserver-tokens"
	ControllerManagerKubeconf = "kube-controller-manager-kubeconfig"
	SchedulerKubeconf         = "kube-scheduler-kubeconfig"
	// ConfigHashAnnotation on each Pod template is a digest of the Secrets
	// its Pods read, so that a change rolls them.
	ConfigHashAnnotation = "tekvirt.io/config-hash"
)

func labels(component string) map[string]string {
	return map[string]string{hc.ComponentLabel: component, "app": component}
}

// APIServerService publishes the API server; its type follows the
// HostedCluster's publishing strategy (ClusterIP, NodePort or
// LoadBalancer). Worker VMs reach it through the pod network.
func APIServerService(ns string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.APIServerService, Labels: labels("kube-apiserver")},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: labels("kube-apiserver"),
			Ports: []corev1.ServicePort{{Name: "https", Port: hc.APIServerPort, TargetPort: intstr.FromInt32(hc.APIServerPort),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// secretFile is one file a container reads from a Secret.
type secretFile struct{ secret, key, path string }

// mounts turns files into one volume per Secret (only the named keys,
// readable by the owner only; named prefix-<n>) and the container's
// mounts of each file.
func mounts(prefix string, files []secretFile) ([]corev1.Volume, []corev1.VolumeMount) {
	mode := int32(0o400)
	var vols []corev1.Volume
	var vms []corev1.VolumeMount
	index := map[string]int{}
	for _, f := range files {
		i, ok := index[f.secret]
		if !ok {
			i = len(vols)
			index[f.secret] = i
			vols = append(vols, corev1.Volume{Name: fmt.Sprintf("%s-%d", prefix, i), VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: f.secret, DefaultMode: &mode}}})
		}
		vols[i].Secret.Items = append(vols[i].Secret.Items, corev1.KeyToPath{Key: f.key, Path: f.key})
		vms = append(vms, corev1.VolumeMount{Name: vols[i].Name, MountPath: f.path, SubPath: f.key, ReadOnly: true})
	}
	return vols, vms
}

// deployment runs one control-plane binary from the release image.
func deployment(ns, name, image string, replicas int32, hash string, args []string, files []secretFile, probe *corev1.Probe, port int32, cpu, memory string) *appsv1.Deployment {
	vols, vms := mounts("secret", files)
	c := corev1.Container{
		Name: name, Image: image, Command: append([]string{"/usr/bin/" + name}, args...),
		VolumeMounts: vms, ReadinessProbe: probe, SecurityContext: podsecurity.Container(),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}},
	}
	if port != 0 {
		c.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: port}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels(name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels(name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(name), Annotations: map[string]string{ConfigHashAnnotation: hash}},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: new(bool),
					EnableServiceLinks:           new(bool),
					SecurityContext:              podsecurity.Pod(hc.ControlPlaneUser),
					Containers:                   []corev1.Container{c},
					Volumes:                      vols,
					TopologySpreadConstraints:    hostedcp.SpreadOverNodes(labels(name)),
				},
			},
		},
	}
}

// Cluster is what the control plane's Deployments are made from.
type Cluster struct {
	Namespace    string
	Image        string
	Replicas     int32
	ServiceCIDR  string
	ClusterCIDR  string
	AdvertiseIP  string // the API server Service's ClusterIP
	EtcdEndpoint string
	Hash         string
}

func pkiFile(name, path string) secretFile {
	return secretFile{hc.PKISecret, name, path}
}

// APIServer is the kube-apiserver Deployment: client certificates from the
// cluster CA, bearer tokens from the token file (kubeadmin), bootstrap
// tokens (workers joining), Node and RBAC authorization; its way into the
// hosted cluster is the Konnectivity proxy server beside it.
func APIServer(cl Cluster) *appsv1.Deployment {
	const d = "/etc/kubernetes/"
	files := []secretFile{
		{ServingSecret, "tls.crt", d + "serving/tls.crt"}, {ServingSecret, "tls.key", d + "serving/tls.key"},
		{TokensSecret, "tokens.csv", d + "tokens/tokens.csv"},
		pkiFile(hc.Cert(hc.CAKey), d+"pki/ca.crt"),
		pkiFile(hc.ServiceAccountKey+".pub", d+"pki/sa.pub"), pkiFile(hc.Key(hc.ServiceAccountKey), d+"pki/sa.key"),
		pkiFile(hc.Cert(hc.EtcdCAKey), d+"pki/etcd-ca.crt"),
		pkiFile(hc.Cert(hc.EtcdClient), d+"pki/etcd-client.crt"), pkiFile(hc.Key(hc.EtcdClient), d+"pki/etcd-client.key"),
		pkiFile(hc.Cert(hc.KubeletClient), d+"pki/kubelet-client.crt"), pkiFile(hc.Key(hc.KubeletClient), d+"pki/kubelet-client.key"),
	}
	args := []string{
		"--secure-port=" + fmt.Sprint(hc.APIServerPort), "--advertise-address=" + cl.AdvertiseIP,
		"--etcd-servers=" + cl.EtcdEndpoint, "--etcd-cafile=" + d + "pki/etcd-ca.crt",
		"--etcd-certfile=" + d + "pki/etcd-client.crt", "--etcd-keyfile=" + d + "pki/etcd-client.key",
		"--tls-cert-file=" + d + "serving/tls.crt", "--tls-private-key-file=" + d + "serving/tls.key",
		"--client-ca-file=" + d + "pki/ca.crt", "--token-auth-file=" + d + "tokens/tokens.csv",
		"--enable-bootstrap-token-auth=true", "--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-key-file=" + d + "pki/sa.pub", "--service-account-signing-key-file=" + d + "pki/sa.key",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + cl.ServiceCIDR, "--service-node-port-range=" + hc.NodePortRange(),
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + d + "pki/kubelet-client.crt", "--kubelet-client-key=" + d + "pki/kubelet-client.key",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// A replica going away keeps serving while its endpoint leaves the
		// Service, so that clients never meet a closed port.
		"--shutdown-delay-duration=5s",
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(hc.APIServerPort), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 3, TimeoutSeconds: 5}
	dep := deployment(cl.Namespace, hc.APIServerDeployment, cl.Image, cl.Replicas, cl.Hash, args, files, probe, hc.APIServerPort, "50m", "256Mi")
	withKonnectivity(dep, cl.Image, cl.Replicas)
	return dep
}

// ControllerManager is the kube-controller-manager Deployment: it signs
// kubelet certificates with the cluster CA, allocates node Pod CIDRs and
// runs the bootstrap-token controllers workers join with.
func ControllerManager(cl Cluster) *appsv1.Deployment {
	const d = "/etc/kubernetes/"
	files := []secretFile{
		{ControllerManagerKubeconf, hc.KubeconfigKey, d + "kubeconfig"},
		pkiFile(hc.Cert(hc.CAKey), d+"pki/ca.crt"), pkiFile(hc.Key(hc.CAKey), d+"pki/ca.key"),
		pkiFile(hc.Key(hc.ServiceAccountKey), d+"pki/sa.key"),
	}
	kc := d + "kubeconfig"
	args := []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--cluster-signing-cert-file=" + d + "pki/ca.crt", "--cluster-signing-key-file=" + d + "pki/ca.key",
		"--root-ca-file=" + d + "pki/ca.crt", "--service-account-private-key-file=" + d + "pki/sa.key",
		"--use-service-account-credentials=true", "--controllers=*,bootstrapsigner,tokencleaner",
		"--allocate-node-cidrs=true", "--cluster-cidr=" + cl.ClusterCIDR, "--service-cluster-ip-range=" + cl.ServiceCIDR,
		"--leader-elect=true",
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(10257), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 5, TimeoutSeconds: 5}
	return deployment(cl.Namespace, hc.ControllerManagerDeployment, cl.Image, cl.Replicas, cl.Hash, args, files, probe, 0, "20m", "96Mi")
}

// Scheduler is the kube-scheduler Deployment.
func Scheduler(cl Cluster) *appsv1.Deployment {
	const kc = "/etc/kubernetes/kubeconfig"
	files := []secretFile{{SchedulerKubeconf, hc.KubeconfigKey, kc}}
	args := []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc, "--leader-elect=true"}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(10259), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 5, TimeoutSeconds: 5}
	return deployment(cl.Namespace, hc.SchedulerDeployment, cl.Image, cl.Replicas, cl.Hash, args, files, probe, 0, "10m", "64Mi")
}
