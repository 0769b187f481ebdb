// Package hyperconverged reconciles the HyperConverged entry object: it
// installs tekvirt's task catalog (Tasks, their ServiceAccounts and
// RoleBindings) into the namespace the spec names and keeps it in sync, so a
// deleted or edited catalog object is restored.
package hyperconverged
