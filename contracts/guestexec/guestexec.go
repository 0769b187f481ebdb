package guestexec

// Request runs a program in the guest through its agent.
type Request struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// TimeoutSeconds bounds the run; 0 means 60.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Result is how the program ended.
type Result struct {
	ExitCode  int    `json:"exitCode"`
	Stdout    []byte `json:"stdout"`
	Stderr    []byte `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
}

// AddressAnnotation on a Node, and on each VMI it runs, says where the
// node's handler serves exec and the other VMI operations (host:port).
const AddressAnnotation = "tekvirt.io/handler-address"
