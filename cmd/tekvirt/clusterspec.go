package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/api/util/ipnet"
)

// clusterOptions are the flags of `create cluster kubevirt`, as hcp's.
type clusterOptions struct {
	name, namespace    string
	releaseImage       string
	nodePoolReplicas   int32
	pullSecretFile     string
	memory             string
	cores              uint32
	rootVolumeClass    string
	rootVolumeSize     uint32
	rootVolumeCache    string
	storageMappings    []string
	snapshotMappings   []string
	etcdStorageClass   string
	baseDomain         string
	hostDevices        []string
	availabilityPolicy string
	annotations        []string
	render             bool
}

// clusterObjects are what `create cluster kubevirt` creates, in order.
type clusterObjects struct {
	namespace  *corev1.Namespace
	pullSecret *corev1.Secret
	cluster    *hyperv1.HostedCluster
	nodePool   *hyperv1.NodePool
}

func (c *clusterObjects) list() []client.Object {
	return []client.Object{c.namespace, c.pullSecret, c.cluster, c.nodePool}
}

// flagError names the flag a bad value came with.
func flagError(flag, format string, args ...any) error {
	return fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))
}

// buildCluster checks o and turns it into the objects, the pull secret's
// content given (the file's bytes); nothing is sent anywhere.
func buildCluster(o clusterOptions, pullSecret []byte) (*clusterObjects, error) {
	if err := checkIdentity(o, pullSecret); err != nil {
		return nil, err
	}
	mem, err := resource.ParseQuantity(o.memory)
	if err != nil || mem.Sign() <= 0 {
		return nil, flagError("memory", "%q is not a memory quantity", o.memory)
	}
	if o.cores == 0 {
		return nil, flagError("cores", "must be at least 1")
	}
	if o.nodePoolReplicas < 0 {
		return nil, flagError("node-pool-replicas", "%d is negative", o.nodePoolReplicas)
	}
	cache := hyperv1.KubevirtCachingStrategyType(o.rootVolumeCache)
	if cache != hyperv1.KubevirtCachingStrategyNone && cache != hyperv1.KubevirtCachingStrategyPVC {
		return nil, flagError("root-volume-cache-strategy", "%q: want None or PVC", o.rootVolumeCache)
	}
	policy := hyperv1.AvailabilityPolicy(o.availabilityPolicy)
	if policy != hyperv1.SingleReplica && policy != hyperv1.HighlyAvailable {
		return nil, flagError("control-plane-availability-policy", "%q: want SingleReplica or HighlyAvailable", o.availabilityPolicy)
	}
	storage, err := storageDriver(o.storageMappings, o.snapshotMappings)
	if err != nil {
		return nil, err
	}
	devices, err := hostDevices(o.hostDevices)
	if err != nil {
		return nil, err
	}
	annotations, err := keyValues("annotations", o.annotations)
	if err != nil {
		return nil, err
	}
	objs := &clusterObjects{
		namespace: &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: o.namespace}},
		pullSecret: &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name + "-pull-secret"},
			Type:       corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: pullSecret}},
	}
	objs.cluster = hostedClusterOf(o, policy, storage)
	objs.cluster.Annotations = annotations
	objs.nodePool = nodePoolOf(o, mem, cache, devices)
	return objs, nil
}

// keyValues parses the key=value items of a repeatable flag (hcp's
// --annotations), each key a qualified name.
func keyValues(flag string, items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, flagError(flag, "%q is not key=value", item)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, flagError(flag, "%q: %s", k, strings.Join(errs, ", "))
		}
		out[k] = v
	}
	return out, nil
}

func hostedClusterOf(o clusterOptions, policy hyperv1.AvailabilityPolicy, storage *hyperv1.KubevirtStorageDriverSpec) *hyperv1.HostedCluster {
	route := hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}
	hc := &hyperv1.HostedCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name},
		Spec: hyperv1.HostedClusterSpec{
			Release:    hyperv1.Release{Image: o.releaseImage},
			PullSecret: corev1.LocalObjectReference{Name: o.name + "-pull-secret"},
			Platform:   hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform},
			Networking: hyperv1.ClusterNetworking{
				ClusterNetwork: []hyperv1.ClusterNetworkEntry{{CIDR: *ipnet.MustParseCIDR("10.132.0.0/14")}},
				ServiceNetwork: []hyperv1.ServiceNetworkEntry{{CIDR: *ipnet.MustParseCIDR("172.31.0.0/16")}},
				NetworkType:    hyperv1.OVNKubernetes,
			},
			Etcd: hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{
				Type: hyperv1.PersistentVolumeEtcdStorage, PersistentVolume: &hyperv1.PersistentVolumeEtcdStorageSpec{Size: &hyperv1.DefaultPersistentVolumeEtcdStorageSize}}}},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				{Service: hyperv1.APIServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.LoadBalancer}},
				{Service: hyperv1.OAuthServer, ServicePublishingStrategy: route},
				{Service: hyperv1.Konnectivity, ServicePublishingStrategy: route},
				{Service: hyperv1.Ignition, ServicePublishingStrategy: route},
			},
			ControllerAvailabilityPolicy:     policy,
			InfrastructureAvailabilityPolicy: hyperv1.SingleReplica,
		},
	}
	hc.Spec.DNS.BaseDomain = o.baseDomain
	if o.etcdStorageClass != "" {
		hc.Spec.Etcd.Managed.Storage.PersistentVolume.StorageClassName = &o.etcdStorageClass
	}
	// As hcp does: the suffix of the cluster's infrastructure objects (its
	// default-ingress passthrough Service).
	hc.Spec.Platform.Kubevirt = &hyperv1.KubevirtPlatformSpec{GenerateID: utilrand.String(10), StorageDriver: storage}
	return hc
}

func nodePoolOf(o clusterOptions, mem resource.Quantity, cache hyperv1.KubevirtCachingStrategyType, devices []hyperv1.KubevirtHostDevice) *hyperv1.NodePool {
	size := resource.MustParse(strconv.FormatUint(uint64(o.rootVolumeSize), 10) + "Gi")
	replicas, cores := o.nodePoolReplicas, o.cores
	vol := &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Type: hyperv1.KubevirtVolumeTypePersistent,
		Persistent: &hyperv1.KubevirtPersistentVolume{Size: &size}}}
	if o.rootVolumeClass != "" {
		vol.Persistent.StorageClass = &o.rootVolumeClass
	}
	if cache == hyperv1.KubevirtCachingStrategyPVC {
		vol.CacheStrategy = &hyperv1.KubevirtCachingStrategy{Type: cache}
	}
	return &hyperv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: hyperv1.GroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name},
		Spec: hyperv1.NodePoolSpec{
			ClusterName: o.name,
			Replicas:    &replicas,
			Management:  hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace},
			Release:     hyperv1.Release{Image: o.releaseImage},
			Platform: hyperv1.NodePoolPlatform{Type: hyperv1.KubevirtPlatform, Kubevirt: &hyperv1.KubevirtNodePoolPlatform{
				Compute:             &hyperv1.KubevirtCompute{Memory: &mem, Cores: &cores},
				RootVolume:          vol,
				KubevirtHostDevices: devices,
			}},
		},
	}
}

// checkIdentity checks the names, the pull secret and the release image.
func checkIdentity(o clusterOptions, pullSecret []byte) error {
	if errs := validation.IsDNS1123Label(o.name); o.name == "" || len(errs) > 0 {
		return flagError("name", "%q is not a DNS label: %s", o.name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return flagError("namespace", "%q is not a DNS label: %s", o.namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.baseDomain); o.baseDomain != "" && len(errs) > 0 {
		return flagError("base-domain", "%q is not a DNS name: %s", o.baseDomain, strings.Join(errs, "; "))
	}
	if err := checkPullSecret(pullSecret); err != nil {
		return flagError("pull-secret", "%s: %v", o.pullSecretFile, err)
	}
	if o.releaseImage == "" {
		return flagError("release-image", "required: the hosted control plane release image")
	}
	return nil
}

// checkPullSecret accepts a docker config JSON: an object with "auths".
func checkPullSecret(data []byte) error {
	var cfg struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("not a docker config JSON: %w", err)
	}
	if cfg.Auths == nil {
		return fmt.Errorf(`not a docker config JSON: no "auths"`)
	}
	return nil
}

// parseClassMapping reads <infra>/<guest>[,group=<g>].
func parseClassMapping(flag, v string) (infra, guest, group string, err error) {
	pair, rest, hasRest := strings.Cut(v, ",")
	infra, guest, ok := strings.Cut(pair, "/")
	if !ok || infra == "" || guest == "" || strings.Contains(guest, "/") {
		return "", "", "", flagError(flag, "%q: want <infra>/<guest>[,group=<g>]", v)
	}
	if hasRest {
		g, found := strings.CutPrefix(rest, "group=")
		if !found || g == "" || strings.Contains(g, ",") {
			return "", "", "", flagError(flag, "%q: after the mapping only group=<g> may follow", v)
		}
		group = g
	}
	return infra, guest, group, nil
}

// storageDriver is the Manual storage driver of the mappings, or nil.
func storageDriver(classes, snapshots []string) (*hyperv1.KubevirtStorageDriverSpec, error) {
	if len(classes) == 0 && len(snapshots) == 0 {
		return nil, nil
	}
	manual := &hyperv1.KubevirtManualStorageDriverConfig{}
	for _, v := range classes {
		infra, guest, group, err := parseClassMapping("infra-storage-class-mapping", v)
		if err != nil {
			return nil, err
		}
		manual.StorageClassMapping = append(manual.StorageClassMapping, hyperv1.KubevirtStorageClassMapping{
			InfraStorageClassName: infra, GuestStorageClassName: guest, Group: group})
	}
	for _, v := range snapshots {
		infra, guest, group, err := parseClassMapping("infra-volumesnapshot-class-mapping", v)
		if err != nil {
			return nil, err
		}
		manual.VolumeSnapshotClassMapping = append(manual.VolumeSnapshotClassMapping, hyperv1.KubevirtVolumeSnapshotClassMapping{
			InfraVolumeSnapshotClassName: infra, GuestVolumeSnapshotClassName: guest, Group: group})
	}
	return &hyperv1.KubevirtStorageDriverSpec{Type: hyperv1.ManualKubevirtStorageDriverConfigType, Manual: manual}, nil
}

// hostDevices reads "<name>[,count:<n>]" values (count defaults to 1).
func hostDevices(values []string) ([]hyperv1.KubevirtHostDevice, error) {
	var out []hyperv1.KubevirtHostDevice
	for _, v := range values {
		name, rest, hasRest := strings.Cut(v, ",")
		if name == "" {
			return nil, flagError("host-device-name", "%q: want <name>[,count:<n>]", v)
		}
		count := 1
		if hasRest {
			n, found := strings.CutPrefix(rest, "count:")
			c, err := strconv.Atoi(n)
			if !found || err != nil || c < 1 {
				return nil, flagError("host-device-name", "%q: count must be count:<n> with n >= 1", v)
			}
			count = c
		}
		out = append(out, hyperv1.KubevirtHostDevice{DeviceName: name, Count: count})
	}
	return out, nil
}
