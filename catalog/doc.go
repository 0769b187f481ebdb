// Package catalog is tekvirt's published set of Tekton tasks and pipelines:
// it reads the hand-written manifests embedded from tasks/ (and pipelines/),
// resolves their ko://<import path> image names to built images, and yields
// the objects the controller installs into a namespace: each Task with the
// ServiceAccount named by its task.kubevirt.io/associatedServiceAccount
// annotation and a RoleBinding to the task's ClusterRole.
package catalog
