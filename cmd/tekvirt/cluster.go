package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/trust"
)

// clusterCmds are `create cluster kubevirt` and `destroy cluster kubevirt`,
// with the flags of hcp's commands of those names.
func clusterCmds(g *globalFlags) []*cobra.Command {
	o := clusterOptions{}
	create := &cobra.Command{Use: "kubevirt", Short: "Create a hosted cluster whose workers are tekvirt VMs (HostedCluster, NodePool, pull secret)", Args: cobra.NoArgs,
		Long: "Create a HyperShift HostedCluster of the KubeVirt platform, its NodePool and its pull secret, as\n" +
			"`hcp create cluster kubevirt` does with the same flags. A bad value fails before anything is created.",
		Example: `  echo '{"auths":{}}' > pull-secret.json
  tekvirt create cluster kubevirt --name demo --pull-secret pull-secret.json --node-pool-replicas 2 --memory 1Gi --cores 1
  kubectl wait hostedcluster demo -n clusters --for=condition=Available --timeout=10m`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.createCluster(cmd.Context(), o, cmd.OutOrStdout())
		}}
	fl := create.Flags()
	fl.StringVar(&o.name, "name", "example", "name of the hosted cluster")
	fl.StringVar(&o.namespace, "namespace", "clusters", "namespace of the HostedCluster and NodePool")
	fl.StringVar(&o.releaseImage, "release-image", "", "the hosted control plane's release image (default: the one this tekvirt install was built with)")
	fl.Int32Var(&o.nodePoolReplicas, "node-pool-replicas", 2, "workers of the NodePool")
	fl.StringVar(&o.pullSecretFile, "pull-secret", "", "file with a docker config JSON the workers pull images with (required)")
	fl.StringVar(&o.memory, "memory", "8Gi", "memory of each worker VM")
	fl.Uint32Var(&o.cores, "cores", 2, "cores of each worker VM")
	fl.StringVar(&o.rootVolumeClass, "root-volume-storage-class", "", "StorageClass of the workers' root volumes (default: the default class)")
	fl.Uint32Var(&o.rootVolumeSize, "root-volume-size", 32, "size of each worker's root volume in GiB")
	fl.StringVar(&o.rootVolumeCache, "root-volume-cache-strategy", "None", "None, or PVC: import the boot image once and clone each root volume from it")
	fl.StringArrayVar(&o.storageMappings, "infra-storage-class-mapping", nil, "<infra>/<guest>[,group=<g>]: an infrastructure StorageClass the hosted cluster sees as <guest> (repeatable)")
	fl.StringArrayVar(&o.snapshotMappings, "infra-volumesnapshot-class-mapping", nil, "<infra>/<guest>[,group=<g>]: the same for VolumeSnapshotClasses (repeatable)")
	fl.StringVar(&o.baseDomain, "base-domain", "", "the hosted cluster's base domain: its default ingress serves *.apps.<name>.<base-domain> (default: "+hostedcluster.DefaultBaseDomain+")")
	fl.StringVar(&o.etcdStorageClass, "etcd-storage-class", "", "StorageClass of etcd's volume (default: the default class)")
	fl.StringArrayVar(&o.hostDevices, "host-device-name", nil, "<name>[,count:<n>]: a host device each worker gets, count 1 unless said (repeatable)")
	fl.StringVar(&o.availabilityPolicy, "control-plane-availability-policy", string(hyperv1.HighlyAvailable), "SingleReplica or HighlyAvailable")
	fl.StringArrayVar(&o.annotations, "annotations", nil, "key=value: an annotation of the HostedCluster (repeatable)")
	fl.BoolVar(&o.render, "render", false, "print the objects instead of creating them")

	var name, ns string
	var destroyWait time.Duration
	destroy := &cobra.Command{Use: "kubevirt", Short: "Delete a hosted cluster: its NodePools, HostedCluster and pull secret", Args: cobra.NoArgs,
		Example: "  tekvirt destroy cluster kubevirt --name demo",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.destroyCluster(cmd.Context(), ns, name, destroyWait, cmd.OutOrStdout())
		}}
	destroy.Flags().StringVar(&name, "name", "example", "name of the hosted cluster")
	destroy.Flags().StringVar(&ns, "namespace", "clusters", "namespace of the HostedCluster")
	destroy.Flags().DurationVar(&destroyWait, "timeout", 10*time.Minute, "how long to wait until the cluster and its control plane are gone (0: do not wait)")

	createCluster := &cobra.Command{Use: "cluster", Short: "Create a hosted cluster", Example: "  tekvirt create cluster kubevirt --name demo --pull-secret pull-secret.json"}
	createCluster.AddCommand(create)
	destroyCluster := &cobra.Command{Use: "cluster", Short: "Destroy a hosted cluster", Example: "  tekvirt destroy cluster kubevirt --name demo"}
	destroyCluster.AddCommand(destroy)
	createTop := &cobra.Command{Use: "create", Short: "Create hosted clusters and their kubeconfigs, as hcp create",
		Example: "  tekvirt create cluster kubevirt --name demo --pull-secret pull-secret.json\n  tekvirt create kubeconfig --name demo > demo.kubeconfig"}
	createTop.AddCommand(createCluster, kubeconfigCmd(g))
	destroyTop := &cobra.Command{Use: "destroy", Short: "Destroy hosted clusters, as hcp destroy", Example: "  tekvirt destroy cluster kubevirt --name demo"}
	destroyTop.AddCommand(destroyCluster)
	return []*cobra.Command{createTop, destroyTop}
}

// createCluster checks every flag, then renders or creates the objects.
func (g *globalFlags) createCluster(ctx context.Context, o clusterOptions, out io.Writer) error {
	if o.pullSecretFile == "" {
		return flagError("pull-secret", "required: a docker config JSON file")
	}
	secret, err := os.ReadFile(o.pullSecretFile)
	if err != nil {
		return flagError("pull-secret", "%v", err)
	}
	if o.releaseImage == "" {
		if o.releaseImage, err = g.installedRelease(ctx); err != nil {
			return flagError("release-image", "not given, and %v", err)
		}
	}
	objs, err := buildCluster(o, secret)
	if err != nil {
		return err
	}
	if o.render {
		return render(out, objs.list())
	}
	c, err := g.vmClient()
	if err != nil {
		return err
	}
	if err := checkStorageClasses(ctx, c, o); err != nil {
		return err
	}
	for _, obj := range objs.list() {
		// Create empties TypeMeta: name the kind before.
		kind, key := obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj)
		err := c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) && obj == objs.namespace {
			continue
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", kind, key, err)
		}
		fmt.Fprintf(out, "%s %s created\n", kind, key)
	}
	return nil
}

// checkStorageClasses fails, naming the flag, on a StorageClass the
// cluster does not have.
func checkStorageClasses(ctx context.Context, c client.Client, o clusterOptions) error {
	named := map[string][]string{"root-volume-storage-class": {o.rootVolumeClass}, "etcd-storage-class": {o.etcdStorageClass}}
	for _, v := range o.storageMappings {
		infra, _, _, _ := parseClassMapping("infra-storage-class-mapping", v)
		named["infra-storage-class-mapping"] = append(named["infra-storage-class-mapping"], infra)
	}
	for flag, classes := range named {
		for _, class := range classes {
			if class == "" {
				continue
			}
			err := c.Get(ctx, client.ObjectKey{Name: class}, &storagev1.StorageClass{})
			if apierrors.IsNotFound(err) {
				return flagError(flag, "StorageClass %q does not exist", class)
			}
			if err != nil {
				return fmt.Errorf("--%s: reading StorageClass %q: %w", flag, class, err)
			}
		}
	}
	return nil
}

// render writes objs as one YAML stream, as they would be sent: no status,
// no creation time.
func render(out io.Writer, objs []client.Object) error {
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		data, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

// installedRelease is the hosted release image the tekvirt install
// publishes.
func (g *globalFlags) installedRelease(ctx context.Context) (string, error) {
	c, err := g.vmClient()
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: trust.Namespace, Name: hostedReleaseConfigMap}
	if err := c.Get(ctx, key, cm); err != nil {
		return "", fmt.Errorf("reading the installed release image (ConfigMap %s): %w", key, err)
	}
	if cm.Data["image"] == "" {
		return "", fmt.Errorf("the ConfigMap %s names no image", key)
	}
	return cm.Data["image"], nil
}

// hostedReleaseConfigMap is where the operator publishes its hosted release image.
const hostedReleaseConfigMap = "tekvirt-hosted-release"

// destroyCluster deletes the cluster's NodePools, the HostedCluster and
// its pull secret, then waits (up to wait) until the NodePools, the
// HostedCluster and its control-plane namespace are gone.
func (g *globalFlags) destroyCluster(ctx context.Context, ns, name string, wait time.Duration, out io.Writer) error {
	c, err := g.vmClient()
	if err != nil {
		return err
	}
	hc := &hyperv1.HostedCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
		return fmt.Errorf("reading HostedCluster %s/%s: %w", ns, name, err)
	}
	var pools hyperv1.NodePoolList
	if err := c.List(ctx, &pools, client.InNamespace(ns)); err != nil {
		return err
	}
	var errs []error
	// What the wait covers: the NodePools too, which their finalizers can
	// keep after the HostedCluster is gone.
	var gone []client.Object
	for i := range pools.Items {
		if pools.Items[i].Spec.ClusterName == name {
			errs = append(errs, deleted(ctx, c, &pools.Items[i], "NodePool", out))
			gone = append(gone, &pools.Items[i])
		}
	}
	errs = append(errs, deleted(ctx, c, hc, "HostedCluster", out))
	if hc.Spec.PullSecret.Name != "" {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hc.Spec.PullSecret.Name}}
		errs = append(errs, deleted(ctx, c, s, "Secret", out))
	}
	if err := errors.Join(errs...); err != nil || wait == 0 {
		return err
	}
	gone = append(gone, hc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostedcluster.ControlPlaneNamespace(ns, name)}})
	return waitGone(ctx, c, wait, out, gone...)
}

// waitGone polls until every object is gone.
func waitGone(ctx context.Context, c client.Client, wait time.Duration, out io.Writer, objs ...client.Object) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for _, obj := range objs {
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%T %s still there after %s", obj, client.ObjectKeyFromObject(obj), wait)
			}
			if err != nil {
				return err
			}
			time.Sleep(time.Second)
		}
	}
	fmt.Fprintln(out, "hosted cluster and its control plane are gone")
	return nil
}

func deleted(ctx context.Context, c client.Client, obj client.Object, kind string, out io.Writer) error {
	if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
		return fmt.Errorf("deleting %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
	}
	fmt.Fprintf(out, "%s %s deleted\n", kind, client.ObjectKeyFromObject(obj))
	return nil
}
