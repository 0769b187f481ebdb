package manager

import (
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogOptions are the binaries' logging defaults, which the --zap-* flags
// override: timestamps to the nanosecond, since the steps of a VM start
// or a migration are milliseconds apart and are ordered across
// components by their logs' times.
func LogOptions() zap.Options {
	return zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
}
