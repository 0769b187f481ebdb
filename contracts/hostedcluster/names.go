package hostedcluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ControlPlaneNamespace is where a HostedCluster's control plane runs, as
// HyperShift names it: "<namespace>-<name>".
func ControlPlaneNamespace(namespace, name string) string {
	return namespace + "-" + name
}

// Labels and annotations the controller and the tasks set.
const (
	// ControlPlaneLabel marks a control-plane namespace, as HyperShift does.
	ControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"
	// ClusterAnnotation on a control-plane namespace names the HostedCluster
	// ("<namespace>/<name>") it belongs to, so that two HostedClusters whose
	// names join to the same namespace never share one.
	ClusterAnnotation = "hypershift.openshift.io/cluster"
	// ComponentLabel names the component of each control-plane object.
	ComponentLabel = "app.kubernetes.io/component"
)

// The PKI Secret in the control-plane namespace holds the cluster's CA
// (CAKey), the etcd CA (EtcdCAKey), the service-account key pair and one
// client identity per component, each as "<name>.crt" and "<name>.key".
const (
	PKISecret = "control-plane-pki"
	CAKey     = "ca"
	EtcdCAKey = "etcd-ca"
	// ServiceAccountKey holds sa.key (RSA, PEM) and sa.pub.
	ServiceAccountKey = "sa"
	// AdminClient is system:admin in system:masters, the admin kubeconfig's user.
	AdminClient = "admin"
	// ControllerManagerClient, SchedulerClient and the API server's clients
	// of etcd and of kubelets.
	ControllerManagerClient = "kube-controller-manager"
	SchedulerClient         = "kube-scheduler"
	EtcdClient              = "apiserver-etcd-client"
	KubeletClient           = "apiserver-kubelet-client"
	// EtcdPeerClient is what etcd members present when they dial each
	// other: a client certificate without addresses, since a member dials
	// from its Pod's address, which no certificate issued beforehand names.
	EtcdPeerClient = "etcd-peer-client"
	// EtcdPeerCommonName is its common name, the only one etcd's peer
	// port accepts.
	EtcdPeerCommonName = "etcd-peer"
)

// Cert and Key are the PKI Secret's keys of a certificate and its key.
func Cert(name string) string { return name + ".crt" }

// Key is the PKI Secret's key of name's private key.
func Key(name string) string { return name + ".key" }

// KubeadminPasswordSecret (key PasswordKey) in the control-plane namespace
// holds the kubeadmin password: a bearer token of the user "kubeadmin" in
// system:masters, which the API server reads from its token file.
const (
	KubeadminPasswordSecret = "kubeadmin-password"
	PasswordKey             = "password"
	KubeadminUser           = "kubeadmin"
)

// Services of the control plane and their ports.
const (
	APIServerService  = "kube-apiserver"
	APIServerPort     = 6443
	EtcdClientService = "etcd-client"
	EtcdClientPort    = 2379
	EtcdPeerPort      = 2380
	EtcdStatefulSet   = "etcd"
)

// EtcdMemberService is the Service of etcd member i, whose ClusterIP is the
// member's address: nothing depends on the cluster's DNS, which a
// management cluster may lack or lose.
func EtcdMemberService(i int) string { return fmt.Sprintf("etcd-%d", i) }

// Deployments of the control plane.
const (
	APIServerDeployment         = "kube-apiserver"
	ControllerManagerDeployment = "kube-controller-manager"
	SchedulerDeployment         = "kube-scheduler"
)

// LocalKubeconfigSecret (key KubeconfigKey) in the control-plane namespace
// is the admin kubeconfig addressing the API server's ClusterIP, for the
// controller and the tasks inside the infrastructure cluster.
const (
	LocalKubeconfigSecret = "admin-kubeconfig"
	KubeconfigKey         = "kubeconfig"
)

// AdminKubeconfigSecret and KubeadminPasswordSecretOf are the access
// Secrets in the HostedCluster's namespace, named as HyperShift names them:
// "<name>-admin-kubeconfig" (key KubeconfigKey) and
// "<name>-kubeadmin-password" (key PasswordKey).
func AdminKubeconfigSecret(cluster string) string { return cluster + "-admin-kubeconfig" }

// KubeadminPasswordSecretOf is the HostedCluster's kubeadmin password Secret.
func KubeadminPasswordSecretOf(cluster string) string { return cluster + "-kubeadmin-password" }

// PublishedAddress is where users reach the API server Service: a load
// balancer's address once one is assigned, else its ClusterIP (reachable
// from the infrastructure cluster's nodes and Pods).
func PublishedAddress(svc *corev1.Service) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
		if in.Hostname != "" {
			return in.Hostname
		}
	}
	return svc.Spec.ClusterIP
}

// PullSecret in the control-plane namespace is the HostedCluster's pull
// secret (spec.pullSecret, key corev1.DockerConfigJsonKey), copied there by
// the access task as HyperShift copies it; the workers' kubelet pulls with it.
const PullSecret = "pull-secret"

// WorkerBootstrapSecret in the control-plane namespace is how a NodePool's
// workers join: UserDataKey holds the worker's "#!" cloud-init user-data
// (the hosted CA, the API server's address and the bootstrap token),
// TokenKey the token ("<id>.<secret>") alone.
const (
	WorkerBootstrapSecret = "worker-bootstrap"
	UserDataKey           = "userdata"
	TokenKey              = "token"
)

// ControllerAccessRole is the ClusterRole the HostedCluster controller
// binds to tekvirt's controller in each control-plane namespace, for the
// NodePool controller: reading the local admin kubeconfig and the worker
// bootstrap Secret there, and making the worker VMs and their disks.
const ControllerAccessRole = "tekvirt-hosted-control-plane-access"

// NodePortRange is the hosted API server's --service-node-port-range, the
// ports the workers take from anywhere (the load balancers and the default
// ingress of the infrastructure forward to them).
const (
	NodePortMin = 30000
	NodePortMax = 32767
)

// NodePortRange is the flag's value.
func NodePortRange() string { return fmt.Sprintf("%d-%d", NodePortMin, NodePortMax) }
