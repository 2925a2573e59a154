package stager

// The subset of the pod API the subject is read in: what a manifest says
// of the init container and its pod that the run honours.

// Container is the subset of a Kubernetes container the run honours.
type Container struct {
	Name                     string           `json:"name"`
	Image                    string           `json:"image"`
	Command                  []string         `json:"command"`
	Args                     []string         `json:"args"`
	WorkingDir               string           `json:"workingDir"`
	Env                      []EnvVar         `json:"env"`
	SecurityContext          *SecurityContext `json:"securityContext"`
	VolumeMounts             []VolumeMount    `json:"volumeMounts"`
	TerminationMessagePath   string           `json:"terminationMessagePath"`
	TerminationMessagePolicy string           `json:"terminationMessagePolicy"`
}

// EnvVar is one environment entry; only literal values can be honoured.
type EnvVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom any    `json:"valueFrom"`
}

// SecurityContext is a container's securityContext.
type SecurityContext struct {
	RunAsUser                *int64        `json:"runAsUser"`
	RunAsGroup               *int64        `json:"runAsGroup"`
	RunAsNonRoot             *bool         `json:"runAsNonRoot"`
	Privileged               *bool         `json:"privileged"`
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool         `json:"readOnlyRootFilesystem"`
	Capabilities             *Capabilities `json:"capabilities"`
}

// Capabilities are added to and dropped from the runtime's default set.
type Capabilities struct {
	Add  []string `json:"add"`
	Drop []string `json:"drop"`
}

// PodSecurityContext is the pod-level securityContext.
type PodSecurityContext struct {
	RunAsUser    *int64 `json:"runAsUser"`
	RunAsGroup   *int64 `json:"runAsGroup"`
	RunAsNonRoot *bool  `json:"runAsNonRoot"`
}

// VolumeMount is one of the container's mounts.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly"`
}

// Volume is a pod volume; only hostPath and emptyDir are told apart.
type Volume struct {
	Name     string    `json:"name"`
	HostPath *HostPath `json:"hostPath"`
	EmptyDir any       `json:"emptyDir"`
}

// HostPath is a hostPath volume source.
type HostPath struct {
	Path string `json:"path"`
}
