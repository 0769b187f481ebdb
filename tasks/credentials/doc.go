// Package credentials reads what a step needs to reach a registry or an
// HTTP server: the basic-auth Secret (accessKeyId and secretKey, CDI's
// secretRef format) and a ConfigMap of extra CA certificates (CDI's
// certConfigMap), both in the TaskRun's namespace.
package credentials
