// Package hostedcluster reconciles HyperShift HostedClusters (platform
// KubeVirt) into a provision-hosted-cluster PipelineRun in the cluster's
// control-plane namespace "<namespace>-<name>", and mirrors its progress
// and the control plane's health into the HostedCluster's status as
// HyperShift reports it: conditions Available, Progressing and Degraded,
// status.version, status.kubeconfig, status.kubeadminPassword and
// status.controlPlaneEndpoint. The reconciler does no provisioning itself;
// the catalog's tasks do. Deleting a HostedCluster deletes its
// control-plane namespace (with everything provisioned in it) and its
// access Secrets before the finalizer is released.
package hostedcluster
